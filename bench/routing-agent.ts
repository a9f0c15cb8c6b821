// Agent routing compare benchmark: how long the host agent takes to decide that
// a pushed routing map changes nothing (the path every 5-minute push takes:
// verify the map's hash, then one GET /id/<config id> to Caddy),
// and to carry out a real change (render, atomic write, Caddy load), against a
// real Caddy (on PATH; `apt-get install caddy`). After `npm run build`:
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
import { startCaddy } from '@tether/testkit';
import { CaddyRoutingController, createCaddyAdmin, renderCaddyConfig, type ProxyConfigurator, type RenderOptions } from '../apps/host-agent/src/proxy/index.js';

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
  const admin = createCaddyAdmin({ adminUrl: caddy.adminUrl, timeoutMs: 120_000 });
  const loadTimes: number[] = [];
  // Times Caddy's own part of a real change (POST /load until Caddy answers).
  const timed: ProxyConfigurator = {
    target: admin.target,
    readRunning: () => admin.readRunning(),
    hasObject: (id) => admin.hasObject(id),
    async load(json) {
      const started = performance.now();
      await admin.load(json);
      loadTimes.push(performance.now() - started);
    },
    close: () => admin.close(),
  };
  const render: RenderOptions = { admin: { listen: `127.0.0.1:${caddy.adminPort}` }, httpPort: caddy.httpPort, httpsPort: 443, tls: 'off' };
  const controller = new CaddyRoutingController({
    proxy: timed,
    render,
    configPath: path.join(stateDir, 'caddy.json'),
    statePath: path.join(stateDir, 'routing-state.json'),
    checkIntervalMs: 0,
    logger: { info: () => undefined, warn: () => undefined, error: () => undefined } as never,
  });
  try {
    const base = routes(0);
    const changed = routes(1);
    const bytes = renderCaddyConfig(base, render).file.length;

    let started = performance.now();
    const first = await controller.apply(wire(base, 1));
    const firstLoad = performance.now() - started;
    if (!first.reloaded) throw new Error(`first apply did not load: ${first.error}`);

    const renderTimes: number[] = [];
    for (let i = 0; i < Math.min(RUNS, 30); i += 1) {
      const input = i % 2 ? [...base].reverse() : base;
      started = performance.now();
      renderCaddyConfig(input, render);
      renderTimes.push(performance.now() - started);
    }

    const noopTimes: number[] = [];
    const verifyTimes: number[] = [];
    const decideTimes: number[] = [];
    const callsBefore = { ...controller.adminCalls };
    for (let i = 0; i < RUNS; i += 1) {
      const map = wire(base, i + 2);
      started = performance.now();
      const result = await controller.apply(map);
      noopTimes.push(performance.now() - started);
      verifyTimes.push(controller.lastApplyMs.verify);
      decideTimes.push(controller.lastApplyMs.decide);
      if (result.changed || result.reloaded || result.error) throw new Error(`no-op apply ${i} acted: ${JSON.stringify(result)}`);
    }
    // The decision alone, without a fresh 1 MB map to verify (and its garbage) before each run:
    // what the periodic proxy check does between its full compares.
    const checkTimes: number[] = [];
    for (let i = 0; i < RUNS; i += 1) {
      started = performance.now();
      await controller.check();
      checkTimes.push(performance.now() - started);
    }
    const calls = controller.adminCalls;
    // The decision must be one id read per push: no full read, no load.
    if (calls.idReads - callsBefore.idReads !== 2 * RUNS || calls.configReads !== callsBefore.configReads || calls.loads !== callsBefore.loads) {
      throw new Error(`no-op pushes made other admin calls: ${JSON.stringify({ callsBefore, calls })}`);
    }

    const changeTimes: number[] = [];
    loadTimes.length = 0;
    for (let i = 0; i < CHANGES; i += 1) {
      const map = wire(i % 2 ? base : changed, RUNS + i + 2);
      started = performance.now();
      const result = await controller.apply(map);
      changeTimes.push(performance.now() - started);
      if (!result.reloaded || result.error) throw new Error(`change ${i} did not reload: ${JSON.stringify(result)}`);
    }

    const rows = [
      ['render only (cold, canonical order + JSON)', stats(renderTimes)],
      ['no-op apply (verify hash, stat file, GET /id/<config id>)', stats(noopTimes)],
      ['  of which verifying the map (canonical order + sha256)', stats(verifyTimes)],
      ['  of which the decision (stat + GET /id/; 0 writes, 0 loads)', stats(decideTimes)],
      ['decision alone (periodic check: stat + GET /id/)', stats(checkTimes)],
      ['real change (render, atomic write, POST /load, state write)', stats(changeTimes)],
      ['  of which Caddy POST /load', stats(loadTimes)],
    ] as const;
    console.log(`routes: ${ROUTES}, config: ${(bytes / 1024 / 1024).toFixed(2)} MB, first load: ${ms(firstLoad)}, node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'})`);
    console.log('| step | runs | median | p99 | max |\n|---|---|---|---|---|');
    for (const [name, s] of rows) console.log(`| ${name} | ${s.runs} | ${ms(s.median)} | ${ms(s.p99)} | ${ms(s.max)} |`);
  } finally {
    await controller.stop();
    await caddy.stop();
    await rm(stateDir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
