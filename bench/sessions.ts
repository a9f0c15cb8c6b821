// Session benchmark: N simulated agents (raw WebSocket clients in a separate
// process, 5 s heartbeats) against a real panel process on a real PostgreSQL.
// Prints sessions held, heartbeats/s, event-loop delay p50/p99, panel RSS per
// session, database writes/s, and the teardown delay of a silent and a
// blackholed subset. Run from the repository root after `npm run build`:
//
//   pnpm --filter @tether/bench sessions -- --sessions 10000
//
// Figures go to docs/benchmarks.md, section "Agent sessions".
import { fork, spawn, execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { startEmbeddedPostgres } from '@tether/embedded-postgres';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: '10000' },
    silent: { type: 'string', default: '100' },
    blackholed: { type: 'string', default: '50' },
    window: { type: 'string', default: '30' },
    idle: { type: 'string', default: '30000' },
    heartbeat: { type: 'string', default: '5000' },
    rate: { type: 'string', default: '1000' },
  },
});
const N = Number(values.sessions);
const SILENT = Number(values.silent);
const BLACKHOLED = process.getuid?.() === 0 ? Number(values.blackholed) : 0;
const WINDOW_S = Number(values.window);
const IDLE_MS = Number(values.idle);
const HEARTBEAT_MS = Number(values.heartbeat);
const FLUSH_MS = 10_000;

const log = (msg: string) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

function metric(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `) || (labels === '' && l.startsWith(`${name} `)));
  return line ? Number(line.split(' ').at(-1)) : NaN;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-bench-'));
  const db = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), persistent: false, onLog: (l) => process.env.BENCH_PG_LOG && process.stderr.write(`pg: ${l}`) });
  const url = await db.createDatabase('tether');
  const adminToken = `tth_op_${randomBytes(24).toString('base64url')}`;
  const cleanups: (() => unknown)[] = [async () => db.stop(), async () => rm(dir, { recursive: true, force: true })];
  const holes: number[] = [];
  try {
    // BENCH_PANEL_NODE_ARGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof", to profile the panel under load.
    const nodeArgs = process.env.BENCH_PANEL_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
    const panel = spawn(process.execPath, [...nodeArgs, path.join(root, 'apps/control-panel/dist/main.js')], {
      env: {
        ...process.env,
        DATABASE_URL: url,
        TETHER_PORT: '0',
        TETHER_LOG_LEVEL: 'warn',
        TETHER_ADMIN_TOKEN: adminToken,
        TETHER_SESSION_IDLE_MS: String(IDLE_MS),
        TETHER_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_MS),
        TETHER_LAST_SEEN_FLUSH_MS: String(FLUSH_MS),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    // SIGTERM first: the panel shuts down gracefully (and writes a --cpu-prof profile when asked to).
    cleanups.unshift(async () => {
      if (panel.exitCode !== null) return;
      const exited = new Promise((resolve) => panel.once('exit', resolve));
      panel.kill('SIGTERM');
      const timer = setTimeout(() => panel.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    });
    const panelUrl = await new Promise<string>((resolve, reject) => {
      let out = '';
      panel.stdout.on('data', (c: Buffer) => {
        if (process.env.BENCH_PANEL_LOG) process.stderr.write(c);
        out += c.toString();
        const m = out.match(/listening on (\S+)/);
        if (m) resolve(m[1]!);
      });
      panel.once('exit', (code) => reject(new Error(`panel exited ${code}`)));
    });
    log(`panel ${panelUrl} (pid ${panel.pid}), PostgreSQL on ${db.port}`);

    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const tokens = Array.from({ length: N }, (_, i) => `tth_node_bench_${i}_${randomBytes(12).toString('base64url')}`);
    for (let i = 0; i < N; i += 5000) {
      const slice = tokens.slice(i, i + 5000);
      await client.query(
        `INSERT INTO nodes (id, name, token_hash) SELECT 'bench_' || n, 'bench-' || n, h FROM unnest($1::int[], $2::text[]) AS t(n, h)`,
        [slice.map((_, j) => i + j), slice.map(sha256)],
      );
    }
    log(`${N} nodes registered`);

    const scrape = async () => (await fetch(`${panelUrl}/metrics`)).text();
    const pidRss = () => Number(execFileSync('ps', ['-o', 'rss=', '-p', String(panel.pid)], { encoding: 'utf8' }).trim()) * 1024;
    await sleep(2_000);
    await scrape();
    const rssBefore = pidRss();

    const agents = fork(path.join(here, 'sessions-agents.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    cleanups.unshift(() => agents.kill('SIGKILL'));
    const closes: { index: number; code: number; at: number }[] = [];
    let progress: { ready: number; failed: number; opened: number; failures?: Record<string, number> } = { ready: 0, failed: 0, opened: 0 };
    agents.on('message', (m: { type: string } & Record<string, never>) => {
      if (m.type === 'progress') progress = m as unknown as typeof progress;
      if (m.type === 'closed') closes.push(m as unknown as (typeof closes)[number]);
    });
    const connectStart = Date.now();
    const connect = async (from: number, to: number) => {
      agents.send({ type: 'start', url: panelUrl, tokens, from, to, heartbeatMs: HEARTBEAT_MS, connectPerSecond: Number(values.rate) });
      while (progress.ready + progress.failed < to) {
        await sleep(500);
        if (Date.now() - connectStart > 900_000) throw new Error(`only ${progress.ready} sessions after 15 min`);
      }
    };
    // Two halves: RSS after the first settled, then after all settled, gives the marginal cost of a
    // session apart from what the process grows once under its first connect storm.
    const half = Math.floor(N / 2);
    await connect(0, half);
    await sleep(HEARTBEAT_MS * 3);
    const rssHalf = pidRss();
    const readyHalf = progress.ready;
    await connect(half, N);
    log(`${progress.ready} sessions ready, ${progress.failed} failed, in ${((Date.now() - connectStart) / 1000).toFixed(1)} s`);
    if (progress.failed > 0) log(`connect failures: ${JSON.stringify(progress.failures)}`);

    await sleep(HEARTBEAT_MS * 2);
    const m0 = await scrape();
    // Transaction ids are assigned only to transactions that write, at once and cluster-wide: the
    // difference over the window counts write transactions exactly (statistics views lag by seconds).
    // The probe itself takes one per call.
    const stat = async () => Number((await client.query<{ x: string }>('SELECT pg_current_xact_id()::text::bigint AS x')).rows[0]!.x);
    const s0 = await stat();
    const t0 = Date.now();
    await sleep(WINDOW_S * 1000);
    const m1 = await scrape();
    const s1 = await stat();
    const elapsed = (Date.now() - t0) / 1000;
    const rssAfter = pidRss();
    const held = metric(m1, 'tether_sessions_connected');
    const heapMiB = (name: string) => (metric(m1, name) / 2 ** 20).toFixed(0);
    const beats = metric(m1, 'tether_frames_received_total', '{type="heartbeat"}') - metric(m0, 'tether_frames_received_total', '{type="heartbeat"}');
    // prom-client samples with monitorEventLoopDelay at a 10 ms resolution, and each sample
    // includes that interval; the delay the loop added is what lies beyond it.
    const lag = (name: string) => Math.max(0, metric(m1, name) * 1000 - 10);
    const p50 = lag('tether_panel_nodejs_eventloop_lag_p50_seconds');
    const p99 = lag('tether_panel_nodejs_eventloop_lag_p99_seconds');
    const max = lag('tether_panel_nodejs_eventloop_lag_max_seconds');
    const writeTransactions = s1 - s0 - 1;

    // Silent subset: stop sending while holding the socket. Blackholed subset: iptables DROP both directions.
    const silent = Array.from({ length: SILENT }, (_, i) => i);
    const black = Array.from({ length: BLACKHOLED }, (_, i) => SILENT + i);
    if (black.length > 0) {
      const ports = await new Promise<number[]>((resolve) => {
        agents.on('message', (m: { type: string; ports?: number[] }) => m.type === 'ports' && resolve(m.ports!));
        agents.send({ type: 'ports', indexes: black });
      });
      for (const port of ports) {
        for (const dir of ['--sport', '--dport']) execFileSync('iptables', ['-w', '-I', 'INPUT', '-i', 'lo', '-p', 'tcp', dir, String(port), '-j', 'DROP']);
        holes.push(port);
      }
    }
    agents.send({ type: 'silence', indexes: silent });
    log(`${silent.length} sessions silent, ${black.length} blackholed; waiting for teardown (deadline ${IDLE_MS} ms)`);
    await sleep(IDLE_MS + HEARTBEAT_MS + 3_000);
    const subset = [...silent, ...black].map((i) => `bench_${i}`);
    const { rows } = await client.query<{ node_id: string; reason: string }>(
      `SELECT node_id, reason FROM session_events WHERE kind = 'closed' AND node_id = ANY($1::text[])`,
      [subset],
    );
    // A silent session can also be caught earlier: a routing push it never ACKs kills it at the ACK timeout.
    const ackTimeouts = (ids: number[]) => {
      const set = new Set(ids.map((i) => `bench_${i}`));
      return rows.filter((r) => set.has(r.node_id) && /not acknowledged within/.test(r.reason)).length;
    };
    const delays = (ids: number[]) => {
      const set = new Set(ids.map((i) => `bench_${i}`));
      return rows
        .filter((r) => set.has(r.node_id) && /no frame for \d+ ms/.test(r.reason))
        .map((r) => Number(r.reason.match(/no frame for (\d+) ms/)?.[1] ?? NaN))
        .sort((a, b) => a - b);
    };
    const d = (label: string, ids: number[]) => {
      const v = delays(ids);
      const late = v.filter((x) => !(x <= IDLE_MS + 1000)).length;
      const acks = ackTimeouts(ids);
      return (
        `${label}: ${v.length + acks}/${ids.length} torn down; ${acks} earlier by the ACK timeout of a routing push; ` +
        `the other ${v.length} at the idle deadline: delay after last frame min ${v[0]} / p50 ${percentile(v, 50)} / p99 ${percentile(v, 99)} / max ${v.at(-1)} ms, ${late} later than deadline + 1 s`
      );
    };
    await client.end();

    console.log('\n=== Tether session benchmark ===');
    console.log(`machine: ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`);
    console.log(`sessions held: ${held} of ${N} (heartbeat ${HEARTBEAT_MS} ms, idle deadline ${IDLE_MS} ms)`);
    console.log(`heartbeats/s: ${(beats / elapsed).toFixed(0)} (window ${elapsed.toFixed(0)} s)`);
    console.log(`event-loop delay (beyond the 10 ms sampling interval): p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${max.toFixed(1)} ms`);
    console.log(
      `panel RSS: ${(rssBefore / 2 ** 20).toFixed(0)} MiB idle, ${(rssHalf / 2 ** 20).toFixed(0)} MiB with ${readyHalf} sessions, ${(rssAfter / 2 ** 20).toFixed(0)} MiB with ${held}: ` +
        `${((rssAfter - rssBefore) / held / 1024).toFixed(1)} KiB per session overall, ${((rssAfter - rssHalf) / Math.max(1, held - readyHalf) / 1024).toFixed(1)} KiB per added session`,
    );
    console.log(
      `panel V8 heap: ${heapMiB('tether_panel_nodejs_heap_size_used_bytes')} MiB used of ${heapMiB('tether_panel_nodejs_heap_size_total_bytes')} MiB, external ${heapMiB('tether_panel_nodejs_external_memory_bytes')} MiB`,
    );
    console.log(`database: ${writeTransactions} write transactions in ${elapsed.toFixed(0)} s = ${(writeTransactions / elapsed).toFixed(2)}/s (last-seen flush every ${FLUSH_MS} ms, one statement for all sessions)`);
    console.log(d('silent subset', silent));
    if (black.length > 0) console.log(d('blackholed subset', black));
    else console.log('blackholed subset: skipped (needs root for iptables)');
    agents.send({ type: 'stop' });
  } finally {
    for (const port of holes) {
      for (const dir of ['--sport', '--dport']) {
        try {
          execFileSync('iptables', ['-w', '-D', 'INPUT', '-i', 'lo', '-p', 'tcp', dir, String(port), '-j', 'DROP']);
        } catch {
          /* already gone */
        }
      }
    }
    for (const c of cleanups) await Promise.resolve(c()).catch(() => undefined);
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
