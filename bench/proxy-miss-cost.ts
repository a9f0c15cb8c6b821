// Where the time of one lookup miss of the static proxy goes (issue 34):
// Caddy 2.6.2 caches 100 SRV names, so with far more hosts in use nearly every
// request asks the answerer. Measured in parts, on one Caddy and one knotd:
//
// 1. knotd alone: SRV queries of route names from one UDP client here, as Go
//    sends them (EDNS 1232), one socket per query like Go's resolver;
// 2. through Caddy, pairs of requests to one host: the first misses the cache
//    (the host was last asked about 2N requests ago, so it was evicted), the
//    second, right after, hits it. miss − hit is what a lookup adds to a request;
// 3. the same with Caddy's resolver pointed at a counting relay in this process
//    (what proxy-routes.ts measured through before 2026-12-05): the relay's hop.
//
//   cd bench && npx tsx proxy-miss-cost.ts [--domains 1000] [--pairs 3000] [--refresh 200]
//
// Needs caddy and knotd on PATH. Figures go to docs/benchmarks.md, "Static proxy".
import dgram from 'node:dgram';
import http from 'node:http';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { countingRelay, pct, startRig, timed } from './static-proxy-rig.js';

const { values } = parseArgs({ options: { domains: { type: 'string', default: '1000' }, pairs: { type: 'string', default: '3000' }, refresh: { type: 'string', default: '200' } } });
const DOMAINS = Number(values.domains);
const PAIRS = Number(values.pairs);
/** Shorter than one pass over the names (2 × DOMAINS requests), so the first of each pair always looks up. */
const REFRESH_MS = Number(values.refresh);

/** An SRV query for `name` with an EDNS OPT record of 1,232 bytes, as Go 1.19's resolver sends it. */
function srvQuery(id: number, name: string): Buffer {
  const labels = name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'ascii')]));
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  header.writeUInt16BE(0x0100, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(1, 10);
  const question = Buffer.concat([...labels, Buffer.from([0, 0, 33, 0, 1])]);
  const opt = Buffer.from([0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
  return Buffer.concat([header, question, opt]);
}

async function knotdAlone(port: number, names: readonly string[], n: number): Promise<{ p50: number; p99: number; bytes: number }> {
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < n; i += 1) {
    const socket = dgram.createSocket('udp4');
    const name = `${names[Math.floor(Math.random() * names.length)]}.h.rt.tether.internal`;
    const started = performance.now();
    const answer = await new Promise<Buffer>((resolve, reject) => {
      socket.once('message', resolve);
      socket.once('error', reject);
      socket.connect(port, '127.0.0.1', () => socket.send(srvQuery(i & 0xffff, name)));
    });
    times.push(performance.now() - started);
    bytes = answer.length;
    socket.close();
  }
  return { ...pct(times), bytes };
}

/** Pairs miss-then-hit over a shuffled cycle of every name; returns both distributions and the paired difference. */
async function pairs(port: number, names: readonly string[], n: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const order = [...names].sort(() => Math.random() - 0.5);
  // Warm the connections and fill the cache with other names.
  for (let i = 0; i < 300; i += 1) await timed(port, order[(i + order.length / 2) % order.length] as string, agent);
  const miss: number[] = [];
  const hit: number[] = [];
  const diff: number[] = [];
  let errors = 0;
  for (let i = 0; i < n; i += 1) {
    const host = order[i % order.length] as string;
    const a = await timed(port, host, agent);
    const b = await timed(port, host, agent);
    if (!a.ok || !b.ok) errors += 1;
    miss.push(a.ms);
    hit.push(b.ms);
    diff.push(a.ms - b.ms);
  }
  agent.destroy();
  return { miss: pct(miss), hit: pct(hit), diff: pct(diff), errors };
}

async function main() {
  const rig = await startRig(DOMAINS);
  const relay = await countingRelay(rig.knotPort);
  const f = (n: number) => n.toFixed(3);
  try {
    const direct = await rig.startStatic(`udp/127.0.0.1:${rig.knotPort}`, { lookupRefreshMs: REFRESH_MS });
    const load = () => os.loadavg().map((l) => l.toFixed(2)).join(' ');
    const alone = await knotdAlone(rig.knotPort, rig.names, PAIRS);
    console.log(`load ${load()}`);
    console.log(`knotd alone (one UDP socket per query, from Node): p50 ${f(alone.p50)} ms, p99 ${f(alone.p99)} ms; answer ${alone.bytes} bytes`);
    const d = await pairs(rig.caddy.httpPort, rig.names, PAIRS);
    console.log(`Caddy -> knotd: miss p50 ${f(d.miss.p50)} p99 ${f(d.miss.p99)}; hit p50 ${f(d.hit.p50)} p99 ${f(d.hit.p99)}; miss-hit p50 ${f(d.diff.p50)} p99 ${f(d.diff.p99)} ms; errors ${d.errors}`);
    await direct.stop();
    const relayed = await rig.startStatic(`udp/127.0.0.1:${relay.port}`, { lookupRefreshMs: REFRESH_MS });
    const before = relay.queries();
    const r = await pairs(rig.caddy.httpPort, rig.names, PAIRS);
    console.log(`Caddy -> relay -> knotd: miss p50 ${f(r.miss.p50)} p99 ${f(r.miss.p99)}; hit p50 ${f(r.hit.p50)} p99 ${f(r.hit.p99)}; miss-hit p50 ${f(r.diff.p50)} p99 ${f(r.diff.p99)} ms; queries per pair ${((relay.queries() - before) / (PAIRS + 300)).toFixed(2)}; errors ${r.errors}`);
    console.log(`load ${load()}`);
    await relayed.stop();
  } finally {
    relay.close();
    await rig.close();
  }
}

await main();
