// Fleet benchmark (issue 13): N simulated agents in several processes on
// several 127.0.0.x source addresses against a real panel process on a real
// PostgreSQL (embedded). In order, on one panel:
//   1. connect: every agent connects (first attempts spread over --spread s)
//      and is pushed its workloads and routing map;
//   2. memory: panel RSS idle and with N sessions, each after a forced GC
//      (the panel runs with --inspect on loopback; the bench asks V8 for a
//      full GC through the inspector), three samples;
//   3. steady: event-loop delay over --window s of 5 s heartbeats;
//   4. dispatch: --deploys deployments one after another through REST, each
//      answered 202 once its agent ACKed (deploy → ACK as a client sees it);
//   5. hostile: one more session sends malformed frames of every kind as fast
//      as it can for --window s while the N others heartbeat;
//   6. storm: the panel is stopped (SIGTERM), stays down --down s, starts on
//      the same port; time until every agent has a session again and was
//      pushed its workloads and map, with the agents' real reconnect backoff
//      and the retry hint of the planned stop (--ignore-hint: agents without it).
// Run from the repository root after `npm run build`:
//
//   pnpm --filter @tether/bench fleet --sessions 10000
//
// BENCH_PANEL_ENV="MALLOC_ARENA_MAX=2" adds environment to the panel;
// BENCH_PANEL_NODE_ARGS adds node flags (BENCH_AGENT_NODE_ARGS to the load
// generators, e.g. --cpu-prof). Figures go to docs/benchmarks.md.
import { fork, spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import WebSocket from 'ws';
import { startEmbeddedPostgres, freeTcpPort } from '@tether/embedded-postgres';
import { listenOverflows } from './panels-meter.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: '10000' },
    'per-process': { type: 'string', default: '2500' },
    spread: { type: 'string', default: '20' },
    window: { type: 'string', default: '30' },
    deploys: { type: 'string', default: '200' },
    down: { type: 'string', default: '5' },
    skip: { type: 'string', default: '' },
    /** The load generators' WebSocket client: lean (bench/lean-ws.ts) or ws (the agent's, costlier on the shared cores). */
    client: { type: 'string', default: 'lean' },
    /** The agents ignore the panel's retry hint (agents older than it): the before figure. */
    'ignore-hint': { type: 'boolean', default: false },
  },
});
const N = Number(values.sessions);
const PER_PROCESS = Number(values['per-process']);
const WINDOW_S = Number(values.window);
const DEPLOYS = Math.min(Number(values.deploys), N);
const skip = new Set(values.skip.split(',').filter(Boolean));
const HEARTBEAT_MS = 5_000;

const readSysctl = (name: string) => {
  try {
    return readFileSync(`/proc/sys/${name}`, 'utf8').trim();
  } catch {
    return '?';
  }
};
const log = (msg: string) => console.log(`[fleet ${new Date().toISOString().slice(11, 19)}] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const pct = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;
};
const metric = (text: string, name: string, labels = '') => {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.split(' ').at(-1)) : NaN;
};

interface Report {
  agents: number;
  ready: number;
  complete: number;
  lastAttempt: number;
  lastComplete: number;
  completeTimes: number[];
  completeAttempts: number[];
  /** Per completed agent: ms to TCP connected (-1: not known), to the upgrade's answer, to welcome, to workloads + map. */
  completeStages: number[][];
  errors: Record<string, number>;
  errorsSince: Record<string, number>;
  closes: Record<string, number>;
}

interface Panel {
  process: ChildProcess;
  url: string;
  listeningAt: number;
  inspector: string;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-fleet-'));
  // BENCH_PG_LOG=<file>: PostgreSQL's log (with every statement: log_statement=all) goes there.
  const pgLog = process.env.BENCH_PG_LOG ? createWriteStream(process.env.BENCH_PG_LOG) : undefined;
  // BENCH_PG_STATEMENTS=<n>: each storm ends with the n statements that took most of PostgreSQL's time (pg_stat_statements).
  const topStatements = Number(process.env.BENCH_PG_STATEMENTS ?? 0);
  const db = await startEmbeddedPostgres({
    dataDir: path.join(dir, 'pg'),
    persistent: false,
    onLog: (line) => pgLog?.write(line),
    ...(topStatements ? { settings: { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'all' } } : {}),
  });
  const dbUrl = await db.createDatabase('tether');
  const adminToken = `tth_op_${randomBytes(24).toString('base64url')}`;
  const port = await freeTcpPort();
  const children: ChildProcess[] = [];
  let panel: Panel | undefined;
  const extraEnv = Object.fromEntries((process.env.BENCH_PANEL_ENV ?? '').split(' ').filter(Boolean).map((kv) => kv.split('=') as [string, string]));
  // The image's node flags (docs/operations.md, "Node flags"), then any the run adds.
  const nodeArgs = ['--max-semi-space-size=32', ...(process.env.BENCH_PANEL_NODE_ARGS?.split(' ').filter(Boolean) ?? [])];

  const startPanel = async (): Promise<Panel> => {
    const child = spawn(process.execPath, ['--inspect=127.0.0.1:0', ...nodeArgs, path.join(root, 'apps/control-panel/dist/main.js')], {
      env: {
        ...process.env,
        // Thousands of agents share each 127.0.0.x address here; the storm, not the per-address cap, is measured.
        TETHER_MAX_CONNECTIONS_PER_ADDRESS: '1000000',
        ...extraEnv,
        DATABASE_URL: dbUrl,
        TETHER_PORT: String(port),
        TETHER_LOG_LEVEL: process.env.BENCH_PANEL_LOG_LEVEL ?? 'warn',
        TETHER_ADMIN_TOKEN: adminToken,
        TETHER_DATA_DIR: path.join(dir, 'panel'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let inspector = '';
    child.stderr!.on('data', (c: Buffer) => {
      const text = c.toString();
      const m = text.match(/Debugger listening on (ws:\S+)/);
      if (m) inspector = m[1]!;
      else if (!/Debugger|For help, see/.test(text)) process.stderr.write(`panel: ${text}`);
    });
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (c: Buffer) => {
        if (process.env.BENCH_PANEL_LOG_LEVEL) process.stderr.write(c);
        out += c.toString();
        const m = out.match(/listening on (\S+)/);
        if (m) resolve(m[1]!);
      });
      child.once('exit', (code) => reject(new Error(`panel exited ${code}`)));
    });
    return { process: child, url, listeningAt: Date.now(), inspector };
  };
  const stopPanel = async (p: Panel) => {
    if (p.process.exitCode !== null) return;
    const exited = new Promise((resolve) => p.process.once('exit', resolve));
    p.process.kill('SIGTERM');
    const timer = setTimeout(() => p.process.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  };
  // A full GC in the panel, through its inspector (the panel has no such endpoint, and must not).
  const gc = async (p: Panel) => {
    const ws = new WebSocket(p.inspector);
    await new Promise((r, j) => ws.once('open', r).once('error', j));
    const done = new Promise((r) => ws.on('message', (d) => JSON.parse(String(d)).id === 1 && r(undefined)));
    ws.send(JSON.stringify({ id: 1, method: 'HeapProfiler.collectGarbage' }));
    await done;
    ws.close();
  };
  const rss = (p: Panel) => Number(execFileSync('ps', ['-o', 'rss=', '-p', String(p.process.pid)], { encoding: 'utf8' }).trim()) * 1024;
  const scrape = async () => (await fetch(`${panel!.url}/metrics`)).text();
  const lag = (text: string, name: string) => Math.max(0, metric(text, `tether_panel_nodejs_eventloop_lag_${name}_seconds`) * 1000 - 10);
  const load = () => os.loadavg().map((l) => l.toFixed(1)).join(' ');

  try {
    const client = new pg.Client({ connectionString: dbUrl });
    await client.connect();
    if (pgLog) await client.query(`ALTER SYSTEM SET log_statement = 'all'`).then(() => client.query('SELECT pg_reload_conf()'));
    if (topStatements) await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    panel = await startPanel();
    const tokens = Array.from({ length: N + 1 }, (_, i) => `tth_node_bench_${i}_${randomBytes(12).toString('base64url')}`);
    for (let i = 0; i < tokens.length; i += 5000) {
      const slice = tokens.slice(i, i + 5000);
      await client.query(`INSERT INTO nodes (id, name, token_hash) SELECT 'bench_' || n, 'bench-' || n, h FROM unnest($1::int[], $2::text[]) AS t(n, h)`, [
        slice.map((_, j) => i + j),
        slice.map(sha256),
      ]);
    }
    const api = async (method: string, p: string, body?: unknown) => {
      const res = await fetch(`${panel!.url}${p}`, {
        method,
        headers: { authorization: `Bearer ${adminToken}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: (await res.json().catch(() => null)) as { id: string } };
    };
    const team = await api('POST', '/v1/teams', { name: 'bench' });
    const services: string[] = [];
    for (let i = 0; i < DEPLOYS; i++) {
      const s = await api('POST', '/v1/services', { teamId: team.body.id, name: `svc-${i}`, image: 'bench/app:1', node: `bench-${Math.floor((i * N) / DEPLOYS)}` });
      services.push(s.body.id);
    }
    log(`panel ${panel.url} (pid ${panel.process.pid}); ${N} nodes, ${DEPLOYS} services; load ${load()}`);
    await sleep(2_000);
    await gc(panel);
    const rssIdle = rss(panel);

    // 1. connect
    const procs = Math.ceil(N / PER_PROCESS);
    const fleet: ChildProcess[] = [];
    for (let k = 0; k < procs; k++) {
      const agentArgs = process.env.BENCH_AGENT_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
      const child = fork(path.join(here, 'fleet-agents.ts'), [], { execArgv: ['--import', 'tsx', ...agentArgs], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      children.push(child);
      fleet.push(child);
      const from = k * PER_PROCESS;
      child.send({ type: 'start', url: panel.url, tokens: tokens.slice(from, Math.min(N, from + PER_PROCESS)), base: from, localAddress: `127.0.0.${10 + k}`, heartbeatMs: HEARTBEAT_MS, spreadMs: Number(values.spread) * 1000, client: values.client === 'ws' ? 'ws' : 'lean' });
    }
    const reports = async (since = 0): Promise<Report[]> =>
      Promise.all(
        fleet.map(
          (c) =>
            new Promise<Report>((resolve) => {
              const on = (m: { type: string } & Report) => {
                if (m.type !== 'report') return;
                c.off('message', on);
                resolve(m);
              };
              c.on('message', on);
              c.send({ type: 'report', since });
            }),
        ),
      );
    const sum = (rs: Report[], key: 'ready' | 'complete') => rs.reduce((n, r) => n + r[key], 0);
    const merge = (rs: Report[], key: 'errors' | 'closes' | 'errorsSince') => {
      const out: Record<string, number> = {};
      for (const r of rs) for (const [k, v] of Object.entries(r[key])) out[k] = (out[k] ?? 0) + v;
      return out;
    };
    const waitComplete = async (limitMs: number, since = 0) => {
      const until = Date.now() + limitMs;
      for (;;) {
        const rs = await reports(since);
        if (sum(rs, 'complete') >= N || Date.now() > until) return rs;
        await sleep(250);
      }
    };
    const t0 = Date.now();
    let rs = await waitComplete(600_000);
    log(`connect: ${sum(rs, 'complete')}/${N} sessions pushed workloads + map in ${((Date.now() - t0) / 1000).toFixed(1)} s (first attempts spread over ${values.spread} s); errors ${JSON.stringify(merge(rs, 'errors'))}`);

    // 2. memory
    await sleep(HEARTBEAT_MS * 2);
    const samples: number[] = [];
    for (let i = 0; i < 3; i++) {
      await gc(panel);
      await sleep(1_000);
      samples.push(rss(panel));
      await sleep(4_000);
    }
    const m = await scrape();
    const held = metric(m, 'tether_sessions_connected');
    const heap = (name: string) => (metric(m, `tether_panel_nodejs_${name}`) / 2 ** 20).toFixed(0);
    log(
      `memory: RSS idle ${(rssIdle / 2 ** 20).toFixed(0)} MiB; with ${held} sessions ${samples.map((s) => (s / 2 ** 20).toFixed(0)).join(' / ')} MiB = ` +
        `${samples.map((s) => ((s - rssIdle) / held / 1024).toFixed(1)).join(' / ')} KiB per session overall; ` +
        `V8 heap ${heap('heap_size_used_bytes')} MiB used of ${heap('heap_size_total_bytes')} MiB, external ${heap('external_memory_bytes')} MiB`,
    );

    // 3. steady
    const beatsOf = (text: string) => metric(text, 'tether_frames_received_total', '{type="heartbeat"}');
    const windowOf = async (label: string, during?: () => Promise<unknown>) => {
      const before = await scrape();
      const started = Date.now();
      const work = during?.();
      await sleep(WINDOW_S * 1000);
      const extra = await work;
      const after = await scrape();
      const seconds = (Date.now() - started) / 1000;
      log(
        `${label}: ${metric(after, 'tether_sessions_connected')} sessions; ${((beatsOf(after) - beatsOf(before)) / seconds).toFixed(0)} heartbeats/s; ` +
          `event-loop delay p50 ${lag(after, 'p50').toFixed(1)} ms, p99 ${lag(after, 'p99').toFixed(1)} ms, max ${lag(after, 'max').toFixed(1)} ms; load ${load()}` +
          (extra ? `; ${JSON.stringify(extra)}` : ''),
      );
    };
    if (!skip.has('steady')) await windowOf('steady');

    // 4. dispatch
    if (!skip.has('dispatch')) {
      const latencies: number[] = [];
      const statuses: Record<number, number> = {};
      for (const id of services) {
        const started = performance.now();
        const res = await api('POST', `/v1/services/${id}/deployments`);
        latencies.push(performance.now() - started);
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      }
      const { rows } = await client.query<{ ms: number }>(
        `SELECT EXTRACT(EPOCH FROM (acked_at - dispatched_at)) * 1000 AS ms FROM deployments WHERE acked_at IS NOT NULL`,
      );
      const acks = rows.map((r) => Number(r.ms));
      log(
        `dispatch at ${N} sessions: ${DEPLOYS} deploys, answers ${JSON.stringify(statuses)}; REST deploy → 202 (ACKed) p50 ${pct(latencies, 50).toFixed(1)} / p99 ${pct(latencies, 99).toFixed(1)} / max ${Math.max(...latencies).toFixed(1)} ms; ` +
          `dispatched → ACK recorded p50 ${pct(acks, 50).toFixed(1)} / p99 ${pct(acks, 99).toFixed(1)} ms`,
      );
    }

    // 5. hostile
    if (!skip.has('hostile')) {
      await windowOf('hostile', async () => {
        const child = fork(path.join(here, 'fleet-hostile.ts'), [panel!.url, tokens[N]!, `bench-${N}`, String(WINDOW_S - 2)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
        children.push(child);
        return new Promise((resolve) => child.on('message', (msg: { type: string }) => msg.type === 'hostile' && resolve({ ...msg, kinds: undefined })));
      });
    }

    // 6. storm, with the agents' real backoff; then 7. the same with every agent retrying every 250 ms
    // (no backoff): what the panel itself can open per second.
    const storm = async (label: string, fixedRetryMs?: number) => {
      for (const c of fleet) c.send({ type: 'mark', fixedRetryMs, ignoreHint: values['ignore-hint'] });
      // Transactions the database committed (each statement outside a transaction is one): before the stop, after the storm.
      const xacts = async () =>
        Number((await client.query<{ n: string }>('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()')).rows[0]!.n);
      const x0 = await xacts();
      // Row writes per table (inserts, updates and how many of those were HOT: no index touched).
      const tableWrites = async () =>
        (
          await client.query<{ relname: string; ins: string; upd: string; hot: string }>(
            `SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd > 0`,
          )
        ).rows;
      const w0 = topStatements ? await tableWrites() : [];
      if (topStatements) await client.query('SELECT pg_stat_statements_reset()');
      const overflows0 = listenOverflows();
      const stopAt = Date.now();
      await stopPanel(panel!);
      log(`${label}: panel stopped in ${Date.now() - stopAt} ms; down ${values.down} s`);
      await sleep(Number(values.down) * 1000);
      panel = await startPanel();
      const up = panel.listeningAt;
      rs = await waitComplete(120_000, up);
      const times = rs.flatMap((r) => r.completeTimes).map((t) => (t - up) / 1000);
      const attempts = rs.flatMap((r) => r.completeAttempts).map((t) => (t - up) / 1000);
      const back = sum(rs, 'complete');
      const all = Math.max(...times);
      log(
        `${label}: ${back}/${N} sessions back and pushed workloads + map; after listening: p50 ${pct(times, 50).toFixed(1)} s, p99 ${pct(times, 99).toFixed(1)} s, all ${all.toFixed(1)} s ` +
          `(${(back / all).toFixed(0)} opens/s); the successful connect attempts started p50 ${pct(attempts, 50).toFixed(1)} s, p99 ${pct(attempts, 99).toFixed(1)} s, up to ${Math.max(...attempts).toFixed(1)} s after listening; ` +
          `connect errors after listening ${JSON.stringify(merge(rs, 'errorsSince'))}; over the whole phase ${JSON.stringify(merge(rs, 'errors'))}; sessions closed ${JSON.stringify(merge(rs, 'closes'))}; load ${load()}`,
      );
      await sleep(1_500); // the statistics collector lags
      // Each is a connection the kernel dropped because the panel's accept queue was full: its agent waits out SYN
      // (or SYN-ACK) retransmits, 1, 3, 7 s…, while the panel may have nothing to do.
      log(`${label}: listen queue overflows (machine) ${listenOverflows() - overflows0}; the panel's backlog ${extraEnv.TETHER_LISTEN_BACKLOG ?? 'default'}, net.core.somaxconn ${readSysctl('net/core/somaxconn')}`);
      log(`${label}: ${(await xacts()) - x0} database transactions from the stop to the last session back (${N} sessions closed and opened)`);
      if (topStatements) {
        const { rows: top } = await client.query<{ calls: string; rows: string; ms: number; query: string }>(
          `SELECT calls, rows, total_exec_time AS ms, query FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT $1`,
          [topStatements],
        );
        for (const t of top) log(`${label}: pg ${Number(t.ms).toFixed(0)} ms, ${t.calls} calls, ${t.rows} rows: ${t.query.replace(/\s+/g, ' ').slice(0, 220)}`);
        const { rows: most } = await client.query<{ calls: string; ms: number; query: string }>(
          `SELECT calls, total_exec_time AS ms, query FROM pg_stat_statements WHERE toplevel ORDER BY calls DESC LIMIT $1`,
          [topStatements],
        );
        const { rows: maint } = await client.query<{ relname: string; vac: string | null; ana: string | null }>(
          `SELECT relname, to_char(last_autovacuum, 'HH24:MI:SS') AS vac, to_char(last_autoanalyze, 'HH24:MI:SS') AS ana FROM pg_stat_user_tables
           WHERE greatest(last_autovacuum, last_autoanalyze) > now() - interval '3 minutes' ORDER BY relname`,
        );
        log(`${label}: autovacuum / autoanalyze in the last 3 minutes: ${maint.map((m) => `${m.relname} vacuum ${m.vac ?? '-'} analyze ${m.ana ?? '-'}`).join('; ') || 'none'}`);
        const before = new Map(w0.map((w) => [w.relname, w]));
        const delta = (await tableWrites()).map((w) => {
          const b = before.get(w.relname);
          const d = (k: 'ins' | 'upd' | 'hot') => Number(w[k]) - Number(b?.[k] ?? 0);
          return { table: w.relname, ins: d('ins'), upd: d('upd'), hot: d('hot') };
        });
        const written = delta.filter((d) => d.ins + d.upd > 0).map((d) => `${d.table} +${d.ins} ins, ${d.upd} upd (${d.hot} HOT)`);
        log(`${label}: rows written per table: ${written.join('; ') || 'none'}`);
        const { rows: sums } = await client.query<{ calls: string; ms: number }>(`SELECT sum(calls) AS calls, sum(total_exec_time) AS ms FROM pg_stat_statements WHERE toplevel`);
        log(`${label}: pg statements sent by clients: ${sums[0]!.calls} (${Number(sums[0]!.ms).toFixed(0)} ms); most called:`);
        for (const t of most) log(`${label}:   ${t.calls} calls, ${Number(t.ms).toFixed(0)} ms: ${t.query.replace(/\s+/g, ' ').slice(0, 160)}`);
      }
      const busy = times.map((t, i) => t - Math.max(0, attempts[i]!));
      log(`${label}: per agent, successful attempt → welcome + workloads + map: p50 ${pct(busy, 50).toFixed(2)} s, p99 ${pct(busy, 99).toFixed(2)} s, max ${Math.max(...busy).toFixed(2)} s`);
      const stages = rs.flatMap((r) => r.completeStages);
      const stage = (i: number, name: string) => {
        const v = stages.map((x) => x[i]!).filter((x) => x >= 0);
        return v.length ? `${name} p50 ${pct(v, 50).toFixed(0)} / p99 ${pct(v, 99).toFixed(0)} / max ${Math.max(...v).toFixed(0)} ms` : `${name} not known`;
      };
      log(`${label}: where that wait was: ${[stage(0, 'TCP connect'), stage(1, 'upgrade answered'), stage(2, 'welcome'), stage(3, 'workloads + map')].join('; ')}`);
    };
    if (!skip.has('storm')) await storm('storm (agent backoff)');
    if (!skip.has('capacity')) await storm('storm (retry every 250 ms)', 250);
    await client.end();
    for (const c of fleet) c.send({ type: 'stop' });
  } finally {
    if (panel) await stopPanel(panel).catch(() => undefined);
    for (const c of children) c.kill('SIGKILL');
    await db.stop().catch(() => undefined);
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
