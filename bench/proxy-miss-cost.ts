// Where the time of one lookup miss of the static proxy goes (issue 34), on
// one Caddy and one knotd:
//
// 1. knotd alone: SRV, A and AAAA queries of its names from one UDP client
//    here, as Go 1.19 sends them (EDNS 1232), one socket per query like Go;
// 2. through Caddy, pairs of requests to each host, once over every host: the
//    first looks the route up (a name Caddy never asked for) and opens the
//    first connection to that service's address, the second uses both. The
//    same pairs through the per-route config (bench/per-route-baseline.ts)
//    open the connection without a lookup: the difference of the two
//    differences is what a lookup adds to a request.
//
//   cd bench && npx tsx proxy-miss-cost.ts [--domains 1000]
//
// Needs caddy, knotd and knotc on PATH. Figures go to docs/benchmarks.md, "Static proxy".
import dgram from 'node:dgram';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { perRouteBaseline } from './per-route-baseline.js';
import { pct, startRig, timed } from './static-proxy-rig.js';

const { values } = parseArgs({ options: { domains: { type: 'string', default: '1000' } } });
const DOMAINS = Number(values.domains);

/** A query of `type` (33 SRV, 1 A, 28 AAAA) for `name` with an EDNS OPT record of 1,232 bytes, as Go 1.19's resolver sends it. */
function query(id: number, name: string, type: number): Buffer {
  const labels = name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'ascii')]));
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  header.writeUInt16BE(0x0100, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(1, 10);
  const question = Buffer.concat([...labels, Buffer.from([0, 0, type, 0, 1])]);
  const opt = Buffer.from([0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
  return Buffer.concat([header, question, opt]);
}

async function knotdAlone(port: number, names: readonly string[], type: number): Promise<{ p50: number; p99: number; bytes: number }> {
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < 3_000; i += 1) {
    const socket = dgram.createSocket('udp4');
    const name = names[Math.floor(Math.random() * names.length)] as string;
    const started = performance.now();
    const answer = await new Promise<Buffer>((resolve, reject) => {
      socket.once('message', resolve);
      socket.once('error', reject);
      socket.connect(port, '127.0.0.1', () => socket.send(query(i & 0xffff, name, type)));
    });
    times.push(performance.now() - started);
    bytes = answer.length;
    socket.close();
  }
  return { ...pct(times), bytes };
}

/** Pairs first-then-second request over every host once; both distributions and the paired difference. */
async function pairs(port: number, names: readonly string[]) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  await timed(port, 'warm.example.com', agent);
  const first: number[] = [];
  const second: number[] = [];
  const diff: number[] = [];
  let errors = 0;
  for (const host of [...names].sort(() => Math.random() - 0.5)) {
    const a = await timed(port, host, agent);
    const b = await timed(port, host, agent);
    if (!a.ok || !b.ok) errors += 1;
    first.push(a.ms);
    second.push(b.ms);
    diff.push(a.ms - b.ms);
  }
  agent.destroy();
  return { first: pct(first), second: pct(second), diff: pct(diff), errors };
}

async function main() {
  const rig = await startRig(DOMAINS);
  const f = (n: number) => n.toFixed(3);
  const load = () => os.loadavg().map((l) => l.toFixed(2)).join(' ');
  const line = (what: string, p: Awaited<ReturnType<typeof pairs>>) =>
    console.log(`${what}: first p50 ${f(p.first.p50)} p99 ${f(p.first.p99)}; second p50 ${f(p.second.p50)} p99 ${f(p.second.p99)}; first-second p50 ${f(p.diff.p50)} p99 ${f(p.diff.p99)} ms; errors ${p.errors}`);
  try {
    const perRoute = perRouteBaseline({ adminUrl: rig.caddy.adminUrl, adminTimeoutMs: 60_000, serving: { httpPort: rig.caddy.httpPort } });
    await perRoute.apply(rig.map);
    console.log(`load ${load()}`);
    const base = await pairs(rig.caddy.httpPort, rig.names);
    line('per-route config (a first connection)', base);
    await perRoute.stop();
    const statik = await rig.startStatic(`udp/127.0.0.1:${rig.knotPort}`);
    const before = await rig.lookups();
    const dyn = await pairs(rig.caddy.httpPort, rig.names);
    const after = await rig.lookups();
    line('static config (a lookup and a first connection)', dyn);
    const asked = Object.entries(after).map(([type, n]) => `${type} ${n - (before[type] ?? 0)}`).join(', ');
    console.log(`queries during those pairs: ${asked}; a lookup adds about p50 ${f(dyn.diff.p50 - base.diff.p50)} ms`);
    const zone = (await readFile(rig.zonePath, 'utf8')).split('\n');
    const owners = (type: string) => zone.filter((l) => l.includes(` ${type} `)).map((l) => `${l.split(' ')[0]}.rt.tether.internal`);
    for (const [type, code] of [['SRV', 33], ['A', 1], ['AAAA', 28]] as const) {
      const names = type === 'AAAA' ? owners('A') : owners(type);
      const alone = await knotdAlone(rig.knotPort, names, code);
      console.log(`knotd alone, ${type} (one UDP socket per query, from Node): p50 ${f(alone.p50)} ms, p99 ${f(alone.p99)} ms; answer ${alone.bytes} bytes`);
    }
    console.log(`load ${load()}`);
    await statik.stop();
  } finally {
    await rig.close();
  }
}

await main();
