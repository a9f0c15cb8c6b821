// Agent routing compare benchmark: how long the host agent takes to decide that
// a pushed routing map changes nothing (the path every 5-minute push takes:
// verify the map's hash, compute the answers and compare their digest, one
// GET /id/<config id> to Caddy), and to carry out a real change (the answers'
// files and the answerer's zone; never a Caddy load), against a real Caddy and
// a real knotd (`apt-get install caddy knot`). After `npm run build`:
//
//   pnpm --filter @tether/bench routing-agent [--routes 10000] [--runs 100] [--changes 10]
//   (or: cd bench && npx tsx routing-agent.ts --routes 10000)
//
// Figures go to docs/benchmarks.md, section "Agent routing compare".
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { routingHash, serviceUpstream, type Route } from '@tether/protocol';
import { freePort, startCaddy } from '@tether/testkit';
import { createExternalRoutingController } from '../apps/host-agent/src/proxy/index.js';

const { values } = parseArgs({
  options: { routes: { type: 'string', default: '10000' }, runs: { type: 'string', default: '100' }, changes: { type: 'string', default: '10' } },
});
const ROUTES = Number(values.routes);
const RUNS = Number(values.runs);
const CHANGES = Number(values.changes);

/** A host's map: one whole-domain route per domain, and a /api route on every tenth. */
function routes(extra: number): Route[] {
  const out: Route[] = [];
  for (let i = 0; out.length < ROUTES + extra; i += 1) {
    out.push({ domain: `app-${i}.customers.example.com`, pathPrefix: null, serviceId: `svc_${i}`, upstream: serviceUpstream(`svc_${i}`, 8080) });
    if (i % 10 === 0 && out.length < ROUTES + extra) out.push({ domain: `app-${i}.customers.example.com`, pathPrefix: '/api', serviceId: `api_${i}`, upstream: serviceUpstream(`api_${i}`, 3000) });
  }
  return out;
}
const wire = (r: Route[], version: number) => JSON.parse(JSON.stringify({ version, hash: routingHash(r), routes: r }));

function stats(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] as number;
  return { runs: sorted.length, median: at(0.5), p99: at(0.99), max: sorted[sorted.length - 1] as number };
}
const ms = (n: number) => `${n.toFixed(1)} ms`;

async function main() {
  const caddy = await startCaddy();
  const stateDir = await mkdtemp(path.join(os.tmpdir(), 'tether-bench-'));
  const controller = createExternalRoutingController({
    stateDir,
    adminUrl: caddy.adminUrl,
    adminTimeoutMs: 120_000,
    checkIntervalMs: 0,
    serving: { tls: 'off', httpPort: caddy.httpPort, httpsPort: 443 },
    answererListen: { host: '127.0.0.1', port: await freePort() },
    knotd: 'knotd',
    knotc: 'knotc',
    answererProbeTimeoutMs: 2_000,
    answersIntervalMs: 0,
    lookupRefreshMs: 1_000,
    askPort: await freePort(),
    issuer: 'internal',
    endpoints: () => Promise.resolve(new Map()),
    logger: { info: () => undefined, warn: () => undefined, error: () => undefined } as never,
  });
  try {
    const base = routes(0);
    const changed = routes(1);
    await controller.start();
    let started = performance.now();
    const first = await controller.apply(wire(base, 1));
    const firstApply = performance.now() - started;
    if (first.error) throw new Error(`first apply failed: ${first.error}`);

    const noopTimes: number[] = [];
    const callsBefore = { ...controller.adminCalls };
    for (let i = 0; i < RUNS; i += 1) {
      const map = wire(base, i + 2);
      started = performance.now();
      const result = await controller.apply(map);
      noopTimes.push(performance.now() - started);
      if (result.changed || result.reloaded || result.error) throw new Error(`no-op apply ${i} acted: ${JSON.stringify(result)}`);
    }
    const checkTimes: number[] = [];
    for (let i = 0; i < RUNS; i += 1) {
      started = performance.now();
      await controller.check();
      checkTimes.push(performance.now() - started);
    }
    const calls = controller.adminCalls;
    // The decision must be one id read per push and per check: no full read, no load.
    if (calls.idReads - callsBefore.idReads !== 2 * RUNS || calls.configReads !== callsBefore.configReads || calls.loads !== callsBefore.loads) {
      throw new Error(`no-op pushes made other admin calls: ${JSON.stringify({ callsBefore, calls })}`);
    }

    const changeTimes: number[] = [];
    for (let i = 0; i < CHANGES; i += 1) {
      const map = wire(i % 2 ? base : changed, RUNS + i + 2);
      started = performance.now();
      const result = await controller.apply(map);
      changeTimes.push(performance.now() - started);
      if (!result.changed || result.reloaded || result.error) throw new Error(`change ${i} did not write only the answers: ${JSON.stringify(result)}`);
    }
    if (controller.adminCalls.loads !== calls.loads) throw new Error('a routing change loaded Caddy');

    const rows = [
      ['no-op apply (verify hash, answers digest, GET /id/<config id>)', stats(noopTimes)],
      ['decision alone (periodic check: GET /id/)', stats(checkTimes)],
      ['real change (answers files + zone, knotd reload; 0 Caddy loads)', stats(changeTimes)],
    ] as const;
    console.log(`routes: ${ROUTES}, first apply (answers + the one load): ${ms(firstApply)}, Caddy loads in all: ${controller.adminCalls.loads}, node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'})`);
    console.log('| step | runs | median | p99 | max |\n|---|---|---|---|---|');
    for (const [name, s] of rows) console.log(`| ${name} | ${s.runs} | ${ms(s.median)} | ${ms(s.p99)} | ${ms(s.max)} |`);
  } finally {
    await controller.stop();
    await controller.knot.destroy();
    await caddy.stop();
    await rm(stateDir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
