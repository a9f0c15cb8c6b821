// Several panels benchmark (issue 10): --panels real panel processes on one
// real PostgreSQL (embedded), --sessions simulated agents in several processes
// on several 127.0.0.x source addresses, each agent given every panel's URL
// (bench/panels-agents.ts), so the fleet spreads over the panels. In order:
//   1. connect: every agent has welcome, workloads and routing map;
//   2. steady: NOTIFY messages/s and database writes/s over --window s at the
//      panels' 5 s heartbeat, then with every agent at --fast-heartbeat ms
//      (writes must not grow with the heartbeat rate);
//   3. dispatch: --deploys services, each deployed once through the panel that
//      owns its node (local) and once through another (cross-panel), in random
//      order: deploy → 202 and deploy → ACK (the agent's clock is this
//      machine's), NOTIFY and writes during the run;
//   4. kill: SIGKILL panel-b; time until each of its agents has a session
//      with workloads and map on another panel, and until the nodes of --hold
//      of its agents that stay away read `unknown` on every other panel
//      (bound: lease + 2 s); then deploys through panel-a to moved nodes.
// Run from the repository root after `npm run build`, one bench at a time:
//
//   flock /tmp/tether-bench.lock pnpm --filter @tether/bench panels --sessions 15000
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { sleep } from '@tether/common';
import { BenchPanels, type PanelProcess } from './panels-cluster.js';
import { Meter, listenOverflows } from './panels-meter.js';
import type { GeneratorCommand, GeneratorReport } from './panels-agents.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: '15000' },
    panels: { type: 'string', default: '3' },
    'per-process': { type: 'string', default: '2500' },
    spread: { type: 'string', default: '30' },
    window: { type: 'string', default: '60' },
    'fast-heartbeat': { type: 'string', default: '1000' },
    deploys: { type: 'string', default: '1000' },
    hold: { type: 'string', default: '50' },
    lease: { type: 'string', default: '10000' },
    skip: { type: 'string', default: '' },
  },
});
const N = Number(values.sessions);
const PANELS = Number(values.panels);
const PER_PROCESS = Number(values['per-process']);
const WINDOW_MS = Number(values.window) * 1000;
const DEPLOYS = Math.min(Number(values.deploys), N);
const LEASE_MS = Number(values.lease);
const skip = new Set(values.skip.split(',').filter(Boolean));

const log = (msg: string) => console.log(`[panels ${new Date().toISOString().slice(11, 19)}] ${msg}`);
const pct = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;
};
const spread = (xs: number[], unit = 'ms', digits = 1) =>
  `p50 ${pct(xs, 50).toFixed(digits)} / p99 ${pct(xs, 99).toFixed(digits)} / max ${Math.max(...xs).toFixed(digits)} ${unit} (n=${xs.length})`;
const metric = (text: string, line: string) => Number(text.split('\n').find((l) => l.startsWith(`${line} `))?.split(' ').at(-1) ?? 0);
/** A summary's quantile for one label (prom-client writes `quantile` and the labels in an order of its own); NaN: none. */
const quantile = (text: string, name: string, label: string, q: string) =>
  Number(text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(label) && l.includes(`quantile="${q}"`))?.split(' ').at(-1) ?? NaN);

async function main(): Promise<void> {
  const cluster = await BenchPanels.start();
  const generators: ChildProcess[] = [];
  let meter: Meter | undefined;
  try {
    // The first panel migrates the database alone; the others start on a migrated one.
    await cluster.startPanel(0, { TETHER_PANEL_LEASE_MS: String(LEASE_MS) });
    await Promise.all(Array.from({ length: PANELS - 1 }, (_, i) => cluster.startPanel(i + 1, { TETHER_PANEL_LEASE_MS: String(LEASE_MS) })));
    const panels = cluster.panels;
    await cluster.insertNodes(N);
    const team = await cluster.api(panels[0]!, 'POST', '/v1/teams', { name: 'bench' });
    // One service on each of DEPLOYS evenly spaced nodes.
    const services: { id: string; nodeId: string; index: number }[] = [];
    for (let i = 0; i < DEPLOYS; i++) {
      const index = Math.floor((i * N) / DEPLOYS);
      const s = await cluster.api(panels[0]!, 'POST', '/v1/services', { teamId: team.body.id, name: `svc-${i}`, image: 'bench/app:1', node: `bench-${index}` });
      services.push({ id: s.body.id!, nodeId: `bench_${index}`, index });
    }
    log(`${PANELS} panels (${panels.map((p) => `${p.id} ${p.url} pid ${p.process.pid}`).join(', ')}); ${N} nodes, ${DEPLOYS} services`);

    const live = () => panels.filter((p) => p.process.child.exitCode === null && p.process.child.signalCode === null);
    // prom-client resets its event-loop histogram at each scrape: the p99 is the window's (less its 10 ms sampling).
    const scrape = async () => {
      const figures = { heartbeats: 0, loopP99Ms: [] as number[], loopMaxMs: [] as number[] };
      for (const p of live()) {
        const text = await (await fetch(`${p.url}/metrics`)).text();
        figures.heartbeats += metric(text, 'tether_frames_received_total{type="heartbeat"}');
        figures.loopP99Ms.push(Math.max(0, metric(text, 'tether_panel_nodejs_eventloop_lag_p99_seconds') * 1000 - 10));
        figures.loopMaxMs.push(Math.max(0, metric(text, 'tether_panel_nodejs_eventloop_lag_max_seconds') * 1000 - 10));
      }
      return figures;
    };
    const groups = async () =>
      new Map([
        ['panels', live().map((p) => p.process.pid)],
        ['postgres', await Meter.postgresPids(cluster.client)],
        ['agents', generators.map((g) => g.pid!)],
      ]);
    meter = await Meter.start(cluster.dbUrl, cluster.client, groups, scrape);

    // 1. connect
    const beforeConnect = await meter.snapshot();
    const overflows = listenOverflows();
    const t0 = Date.now();
    for (let k = 0, from = 0; from < N; k++, from += PER_PROCESS) {
      const child = fork(path.join(here, 'panels-agents.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      generators.push(child);
      const start: GeneratorCommand = { type: 'start', urls: panels.map((p) => p.url), tokens: cluster.tokens.slice(from, from + PER_PROCESS), base: from, localAddress: `127.0.0.${20 + k}`, spreadMs: Number(values.spread) * 1000 };
      child.send(start);
    }
    const tell = (c: GeneratorCommand) => generators.forEach((g) => g.send(c));
    /** Every ACK of a deploy the agents reported (each report hands over those since the previous one). */
    const acks = new Map<string, number>();
    const reports = async () => {
      const rs = await Promise.all(
        generators.map(
          (g) =>
            new Promise<GeneratorReport>((resolve) => {
              const on = (m: GeneratorReport) => {
                if (m.type !== 'report') return;
                g.off('message', on);
                resolve(m);
              };
              g.on('message', on);
              g.send({ type: 'report' } satisfies GeneratorCommand);
            }),
        ),
      );
      for (const r of rs) for (const [id, at] of r.acks) acks.set(id, at);
      return rs;
    };
    const byPanel = (rs: GeneratorReport[]) => panels.map((_, i) => rs.reduce((n, r) => n + r.completeByPanel[i]!, 0));
    const merged = (rs: GeneratorReport[], key: 'errors' | 'closes') => {
      const out: Record<string, number> = {};
      for (const r of rs) for (const [k, v] of Object.entries(r[key])) out[k] = (out[k] ?? 0) + v;
      return JSON.stringify(out);
    };
    let rs = await reports();
    const activity = new Map<string, number>();
    let samples = 0;
    while (byPanel(rs).reduce((a, b) => a + b, 0) < N && Date.now() - t0 < 600_000) {
      await sleep(500);
      await meter.activity(activity);
      samples++;
      rs = await reports();
    }
    log(`connect: ${byPanel(rs).join(' + ')} sessions with workloads + map in ${((Date.now() - t0) / 1000).toFixed(1)} s (first attempts over ${values.spread} s); errors ${merged(rs, 'errors')}; listen queue overflows (machine) ${listenOverflows() - overflows}`);
    log(`connect: ${Meter.describe(beforeConnect, await meter.snapshot())}`);
    const busiest = [...activity].sort((x, y) => y[1] - x[1]).slice(0, 6);
    log(`connect: PostgreSQL backends active per sample (${samples} samples): ${busiest.map(([w, n]) => `${(n / samples).toFixed(2)} ${w}`).join('; ')}`);

    // 2. steady, at two heartbeat rates
    const window = async (label: string, work?: () => Promise<void>) => {
      const a = await meter!.snapshot();
      const done = work ? work() : sleep(WINDOW_MS);
      await done;
      const b = await meter!.snapshot();
      log(`${label}: ${Meter.describe(a, b)}; sessions closed so far ${merged(await reports(), 'closes')}`);
    };
    if (!skip.has('steady')) {
      await sleep(12_000); // past the connect: reports and last-seen times flushed at least once
      await window('steady, 5 s heartbeats');
      tell({ type: 'heartbeat', ms: Number(values['fast-heartbeat']) });
      await sleep(12_000);
      await window(`steady, ${values['fast-heartbeat']} ms heartbeats`);
      tell({ type: 'heartbeat', ms: 0 });
      await sleep(12_000);
    }

    // 3. dispatch: local vs cross-panel
    if (!skip.has('dispatch')) {
      const owners = await cluster.owners();
      const results: { kind: 'local' | 'cross'; id?: string; startedAt: number; ms: number; status: number }[] = [];
      const deploy = async (kind: 'local' | 'cross', serviceId: string, panel: PanelProcess) => {
        const startedAt = Date.now();
        const res = await cluster.api(panel, 'POST', `/v1/services/${serviceId}/deployments`);
        results.push({ kind, id: res.body.id, startedAt, ms: res.ms, status: res.status });
      };
      await window('dispatch', async () => {
        for (const [i, s] of services.entries()) {
          const owner = owners.get(s.nodeId) ?? 0;
          const other = panels[(owner + 1 + (i % (PANELS - 1))) % PANELS]!;
          const pair = [() => deploy('local', s.id, panels[owner]!), () => deploy('cross', s.id, other)];
          if (Math.random() < 0.5) pair.reverse();
          for (const run of pair) await run();
        }
      });
      await reports();
      for (const kind of ['local', 'cross'] as const) {
        const mine = results.filter((r) => r.kind === kind);
        const statuses: Record<number, number> = {};
        for (const r of mine) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
        const toAck = mine.flatMap((r) => (r.id && acks.has(r.id) ? [acks.get(r.id)! - r.startedAt] : []));
        log(`dispatch ${kind}: answers ${JSON.stringify(statuses)}; deploy → 202 ${spread(mine.map((r) => r.ms))}; deploy → ACK sent ${spread(toAck, 'ms', 0)}`);
      }
      // How long the owner's deployment facts waited for their commit in the outbox (the panel's last 60 s; a deploy's 202 waits for both).
      const texts = await Promise.all(live().map(async (p) => (await fetch(`${p.url}/metrics`)).text()));
      for (const kind of ['deployment.dispatched', 'deployment.delivered']) {
        const wait = texts.map((t) => ['0.5', '0.99', '1'].map((q) => (quantile(t, 'tether_session_fact_commit_seconds', `kind="${kind}"`, q) * 1000).toFixed(1)).join(' / '));
        log(`dispatch: outbox commit wait of ${kind} p50 / p99 / max ${wait.join(', ')} ms (panels, last 60 s)`);
      }
      const p99 = (kind: string) => pct(results.filter((r) => r.kind === kind).map((r) => r.ms), 99);
      log(`dispatch: cross-panel overhead p99 ${(p99('cross') - p99('local')).toFixed(1)} ms (target < 50 ms)`);
    }

    // 4. kill panel-b
    if (!skip.has('kill') && PANELS > 1) {
      const victim = 1;
      const owners = await cluster.owners();
      const held = services.filter((s) => owners.get(s.nodeId) === victim).slice(0, Number(values.hold));
      const others = panels.filter((_, i) => i !== victim);
      tell({ type: 'mark', hold: held.map((s) => s.index) });
      const before = byPanel(await reports());
      const unknownAt = new Map<string, number>();
      let polling = true;
      /** The last time any other panel answered a status with the dead panel's session as evidence. */
      let lastDeadEvidence = 0;
      const killedAt = Date.now();
      panels[victim]!.process.child.kill('SIGKILL');
      // Every 250 ms: status on every other panel; a held node counts once it reads unknown on all of them.
      const poll = (async () => {
        while (polling) {
          const seen = new Map<string, number>();
          for (const p of others) {
            const res = await cluster.api(p, 'GET', '/v1/status');
            for (const st of (res.body.services ?? []) as { serviceId: string; state: string; evidence: { panelId?: string } | null }[]) {
              if (st.state === 'unknown') seen.set(st.serviceId, (seen.get(st.serviceId) ?? 0) + 1);
              if (st.state !== 'unknown' && st.evidence?.panelId === panels[victim]!.id) lastDeadEvidence = Date.now() - killedAt;
            }
          }
          for (const s of held) if (!unknownAt.has(s.id) && seen.get(s.id) === others.length) unknownAt.set(s.id, Date.now() - killedAt);
          await sleep(250);
        }
      })();
      log(`kill: ${panels[victim]!.id} SIGKILLed holding ${before[victim]} sessions; ${held.length} of its agents stay away`);
      for (;;) {
        await sleep(500);
        rs = await reports();
        const lost = rs.reduce((n, r) => n + r.lost, 0);
        const back = rs.reduce((n, r) => n + r.backAt.length, 0);
        if ((back >= lost - held.length && unknownAt.size >= held.length && Date.now() - killedAt > LEASE_MS + 2_000) || Date.now() - killedAt > 180_000) break;
      }
      polling = false;
      await poll;
      const backS = rs.flatMap((r) => r.backAt).map((t) => (t - killedAt) / 1000);
      log(
        `kill: ${backS.length}/${rs.reduce((n, r) => n + r.lost, 0) - held.length} of its agents back with workloads + map on another panel: ${spread(backS, 's', 2)}; ` +
          `now ${byPanel(rs).join(' + ')}; connect errors ${merged(rs, 'errors')}; sessions closed ${merged(rs, 'closes')}`,
      );
      const unknown = [...unknownAt.values()].map((ms) => ms / 1000);
      log(`kill: ${unknown.length}/${held.length} nodes left away read unknown on ${others.map((p) => p.id).join(' and ')}: ${spread(unknown, 's', 2)} after the kill (bound: lease ${LEASE_MS / 1000} s + 2 s); a status with ${panels[victim]!.id}'s session as evidence last read ${(lastDeadEvidence / 1000).toFixed(2)} s after the kill`);
      const owned = await cluster.owners();
      const moved = services.filter((s) => owners.get(s.nodeId) === victim && !held.includes(s)).slice(0, 20);
      const answers: Record<number, number> = {};
      for (const s of moved) {
        const res = await cluster.api(others[0]!, 'POST', `/v1/services/${s.id}/deployments`);
        answers[res.status] = (answers[res.status] ?? 0) + 1;
      }
      log(`kill: ${moved.length} deploys through ${others[0]!.id} to moved nodes (now on ${[...new Set(moved.map((s) => panels[owned.get(s.nodeId)!]?.id))].join(', ')}): ${JSON.stringify(answers)}`);
    }
    // A panel that could not renew its lease in time closes its sessions (its agents move): say whether it happened.
    for (const p of panels) {
      const out = p.process.output();
      const count = (re: RegExp) => out.match(re)?.length ?? 0;
      log(`${p.id}: lease renewals failed ${count(/lease renewal failed/g)}, lease lost ${count(/panel lease lost/g)}, LISTEN connection lost ${count(/LISTEN connection lost/g)}`);
    }
    tell({ type: 'stop' });
  } finally {
    await meter?.stop();
    for (const g of generators) g.kill('SIGKILL');
    await cluster.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
