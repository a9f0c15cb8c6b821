// Panel routing push benchmark: the panel's side of the 5-minute routing push
// (incident 2). One routing map of N routes (10,000), computed from a real
// PostgreSQL by the panel's own query, pushed to S sessions (1,000) of
// simulated agents that ACK and answer `routing.applied` like an agent whose
// Caddy already runs that map. Prints the time to compute and to serialize the
// map, and per push cycle (every session pushed once) the panel's CPU time,
// wall time, event-loop stall, bytes sent and sessions lost. Run from the
// repository root:
//
//   pnpm --filter @tether/bench routing-panel [--routes 10000] [--sessions 1000] [--cycles 3]
//   (or: cd bench && npx tsx routing-panel.ts --routes 10000 --sessions 1000)
//
// The panel runs in this process: the app as the panel builds it (buildApp:
// REST, agent gateway, registry, sessions, routing reconciler; Fastify on
// loopback; Prisma on embedded PostgreSQL), so
// process.cpuUsage() is the panel's CPU. The one stand-in: every node gets the
// same map (the one computed for node 0), because 1,000 distinct maps of
// 10,000 routes would need 10 million route rows; the map query is timed on
// its own. The simulated agents run in a child process (this file with
// --agents) and read only the first bytes of a map frame (its id and hash), so
// they take as little CPU as possible from the panel.
//
// Figures go to docs/benchmarks.md, section "Panel routing push".
import { fork } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { PROTOCOL_VERSION, createIdGenerator, encode, type Message, type RoutingStatus } from '@tether/protocol';

const self = fileURLToPath(import.meta.url);

interface AgentsStart {
  url: string;
  tokens: string[];
}

/** Child process: the simulated agents. */
function runAgents(): void {
  const nextId = createIdGenerator('b');
  const runtime = { available: true, error: null };
  let maps = 0;
  let mapBytes = 0;
  let ready = 0;
  const closed: number[] = [];
  const report = () => process.send?.({ type: 'progress', maps, mapBytes, ready, closed: closed.length });
  setInterval(report, 50).unref();

  const connect = (token: string, index: number) => {
    let routing: RoutingStatus = { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null };
    let seq = 0;
    const socket = new WebSocket(`${start.url.replace(/^http/, 'ws')}/v1/agent/connect`, { headers: { authorization: `Bearer ${token}` }, perMessageDeflate: false });
    const send = (m: Message) => socket.readyState === WebSocket.OPEN && socket.send(encode(m));
    socket.on('open', () => send({ type: 'hello', id: nextId(), node: `bench-${index}`, agentVersion: 'bench', protocolVersion: PROTOCOL_VERSION, containers: [], runtime, routing }));
    socket.on('message', (data: Buffer) => {
      // A map frame is 1.4 MB; its id and hash come first, so only the head is read.
      const head = data.subarray(0, 300).toString('utf8');
      if (head.startsWith('{"type":"routing.map"')) {
        const id = /"id":"([^"]+)"/.exec(head)![1]!;
        const hash = /"hash":"([^"]+)"/.exec(head)![1]!;
        maps++;
        mapBytes += data.length;
        send({ type: 'ack', id: nextId(), ref: id });
        routing = { ...routing, appliedHash: hash };
        send({ type: 'routing.applied', id: nextId(), ref: id, hash, changed: false, reloaded: false, error: null, routing });
        return;
      }
      const m = JSON.parse(data.toString('utf8')) as { type: string; id: string; timing?: { heartbeatIntervalMs: number } };
      if (m.type === 'welcome') {
        ready++;
        const every = m.timing!.heartbeatIntervalMs;
        const beat = () => send({ type: 'heartbeat', id: nextId(), seq: seq++, containers: [], runtime, routing });
        setTimeout(() => setInterval(beat, every), Math.random() * every);
      } else if (m.type === 'ping') send({ type: 'pong', id: nextId(), ref: m.id });
      else if (m.type === 'workloads' || m.type === 'deploy') send({ type: 'ack', id: nextId(), ref: m.id });
    });
    socket.on('close', (code) => closed.push(code));
    socket.on('error', () => undefined);
  };

  let start: AgentsStart;
  process.on('message', (m: AgentsStart) => {
    start = m;
    // 20 connects every 50 ms: no connect storm in the figures.
    let next = 0;
    const timer = setInterval(() => {
      for (let i = 0; i < 20 && next < m.tokens.length; i++, next++) connect(m.tokens[next]!, next);
      if (next >= m.tokens.length) clearInterval(timer);
    }, 50);
  });
}

function stats(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] as number;
  return { median: at(0.5), max: sorted[sorted.length - 1] as number };
}

async function timed<T>(runs: number, work: () => Promise<T> | T): Promise<{ median: number; max: number; result: T }> {
  const samples: number[] = [];
  let result!: T;
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    result = await work();
    samples.push(performance.now() - started);
  }
  return { ...stats(samples), result };
}

const log = (msg: string) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MiB = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;

async function runPanel(): Promise<void> {
  const { values } = parseArgs({
    options: { routes: { type: 'string', default: '10000' }, sessions: { type: 'string', default: '1000' }, cycles: { type: 'string', default: '3' } },
  });
  const ROUTES = Number(values.routes);
  const SESSIONS = Number(values.sessions);
  const CYCLES = Number(values.cycles);

  // The panel's modules, imported here so the --agents child does not load them.
  const [{ startEmbeddedPostgres }, panel, panelDb, migrate, tokens, config, events, mapMod] =
    await Promise.all([
      import('@tether/embedded-postgres'),
      import('../apps/control-panel/src/app.js'),
      import('../apps/control-panel/src/db/database.js'),
      import('../apps/control-panel/src/db/migrate.js'),
      import('../apps/control-panel/src/domain/tokens.js'),
      import('../apps/control-panel/src/config.js'),
      import('../apps/control-panel/src/panel-events.js'),
      import('../apps/control-panel/src/routing/routing-map.js'),
    ]);

  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-bench-'));
  const db = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), persistent: false });
  const cleanups: (() => unknown)[] = [() => db.stop(), () => rm(dir, { recursive: true, force: true })];
  try {
    const url = await db.createDatabase('tether');
    await migrate.applyMigrations(url, panelDb.MIGRATIONS_DIR);
    const prisma = panelDb.createPrisma(url);
    cleanups.unshift(() => prisma.$disconnect());

    // Nodes, and on node 0 the routed services: 10 domains per service, each service deployed (running).
    const nodeTokens = Array.from({ length: SESSIONS }, () => tokens.generateToken('node'));
    await prisma.node.createMany({ data: nodeTokens.map((t, i) => ({ id: `node_${i}`, name: `bench-${i}`, tokenHash: tokens.hashToken(t) })) });
    const team = await prisma.team.create({ data: { name: 'bench' } });
    const services = Math.ceil(ROUTES / 10);
    await prisma.service.createMany({
      data: Array.from({ length: services }, (_, i) => ({ id: `svc_${i}`, teamId: team.id, name: `svc-${i}`, image: 'shop:1', internalPort: 8080, nodeId: 'node_0' })),
    });
    await prisma.deployment.createMany({
      data: Array.from({ length: services }, (_, i) => ({
        serviceId: `svc_${i}`,
        nodeId: 'node_0',
        spec: { name: `svc-${i}`, image: 'shop:1', env: {}, internalPort: 8080, replicas: 1 },
        status: 'running' as const,
      })),
    });
    await prisma.route.createMany({ data: Array.from({ length: ROUTES }, (_, i) => ({ domain: `app-${i}.customers.example.com`, serviceId: `svc_${Math.floor(i / 10)}` })) });
    log(`${SESSIONS} nodes, ${ROUTES} routes on ${services} services of node 0`);

    // Computing and serializing the map, each on its own.
    const source = new mapMod.DbRoutingMapSource(prisma);
    await source.mapFor('node_0');
    const compute = await timed(10, () => source.mapFor('node_0'));
    const content = compute.result;
    const frame = { type: 'routing.map' as const, id: 'r-1', version: Date.now(), hash: content.hash, routes: content.routes };
    const serialize = await timed(10, () => encode(frame));
    const stringify = await timed(10, () => JSON.stringify(frame));
    const frameBytes = Buffer.byteLength(serialize.result);
    if (content.routes.length !== ROUTES) throw new Error(`map of node 0 has ${content.routes.length} routes, expected ${ROUTES}`);

    // The panel app, with every node's map = node 0's.
    const cfg = config.loadConfig({
      DATABASE_URL: url,
      TETHER_LOG_LEVEL: 'warn',
      // No periodic push and no debounce: the bench triggers each cycle itself.
      TETHER_RECONCILE_INTERVAL_MS: '86400000',
      TETHER_ROUTING_DEBOUNCE_MS: '0',
    });
    const panelEvents = new events.PanelEvents();
    const app = await panel.buildApp({ config: cfg, prisma, events: panelEvents, routingMaps: { mapFor: async () => content } });
    // Listening makes the app ready, which starts the agent side; closing it stops the layer first.
    const panelUrl = await app.listen({ host: '127.0.0.1', port: 0 });
    cleanups.unshift(() => app.close());
    const layer = app.agentSide;
    const teardowns: string[] = [];
    const onClosed = (session: { nodeName: string }, t: { code: number; reason: string }) => {
      teardowns.push(`${t.code} ${t.reason}`);
      if (teardowns.length <= 3) log(`session lost: ${session.nodeName} ${t.code} ${t.reason}`);
    };
    layer.registry.on('closed', onClosed);
    // The shutdown closes every session: not a loss.
    cleanups.unshift(() => layer.registry.off('closed', onClosed));
    // A cycle ends when the panel has every session's answer, not when the last frame left.
    let answers = 0;
    layer.frames.observe((_session, m) => m.type === 'routing.applied' && answers++);

    const agents = fork(self, ['--agents'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    cleanups.unshift(() => agents.kill('SIGKILL'));
    let progress = { maps: 0, mapBytes: 0, ready: 0, closed: 0 };
    agents.on('message', (m: typeof progress) => (progress = m));
    const waitFor = async (what: string, done: () => boolean, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      while (!done()) {
        if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms (${JSON.stringify(progress)}, ${teardowns.length} teardowns)`);
        await sleep(10);
      }
    };
    const connectStarted = Date.now();
    agents.send({ url: panelUrl, tokens: nodeTokens } satisfies AgentsStart);
    // Each session gets the map once when it opens; wait for those pushes to settle.
    await waitFor('sessions open and first maps ACKed', () => progress.maps >= SESSIONS && answers >= layer.registry.size && progress.ready === SESSIONS, 300_000);
    log(`${layer.registry.size} sessions open, first map on each, in ${((Date.now() - connectStarted) / 1000).toFixed(1)} s; ${teardowns.length} lost`);
    await sleep(2_000);

    const nodeIds = nodeTokens.map((_, i) => `node_${i}`);
    const loop = monitorEventLoopDelay({ resolution: 10 });
    const cycles: Array<{ open: number; wallMs: number; cpuMs: number; bytes: number; stallMs: number; lost: number }> = [];
    for (let c = 0; c < CYCLES; c++) {
      const answersBefore = answers;
      const mapsBefore = progress.maps;
      const open = layer.registry.size;
      const bytesBefore = progress.mapBytes;
      const lostBefore = teardowns.length;
      loop.reset();
      loop.enable();
      const cpu = process.cpuUsage();
      const started = performance.now();
      // What the periodic reconcile does for each session, for all of them at once: push the unchanged map.
      panelEvents.emit('routing.changed', { nodeIds, reason: 'bench cycle' });
      await waitFor(`cycle ${c + 1}`, () => answers >= answersBefore + open - (teardowns.length - lostBefore), 600_000);
      const wallMs = performance.now() - started;
      const used = process.cpuUsage(cpu);
      loop.disable();
      // The agents report every 50 ms: let their count of bytes catch up.
      await waitFor('byte count', () => progress.maps >= mapsBefore + open - (teardowns.length - lostBefore), 5_000);
      cycles.push({
        open,
        wallMs,
        cpuMs: (used.user + used.system) / 1000,
        bytes: progress.mapBytes - bytesBefore,
        stallMs: loop.max / 1e6,
        lost: teardowns.length - lostBefore,
      });
      await sleep(2_000);
    }
    const maxRss = process.resourceUsage().maxRSS * 1024;

    console.log('\n=== Tether panel routing push benchmark ===');
    console.log(`machine: ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`);
    console.log(`map: ${ROUTES} routes, frame ${(frameBytes / 1e6).toFixed(2)} MB`);
    console.log(`compute (panel query + canonical order + hash, node 0): median ${compute.median.toFixed(1)} ms, max ${compute.max.toFixed(1)} ms`);
    console.log(`serialize (encode: validate + JSON): median ${serialize.median.toFixed(1)} ms; JSON.stringify alone ${stringify.median.toFixed(1)} ms`);
    for (const [i, r] of cycles.entries()) {
      console.log(
        `cycle ${i + 1}: ${r.open} sessions pushed in ${(r.wallMs / 1000).toFixed(2)} s wall; panel CPU ${(r.cpuMs / 1000).toFixed(2)} s ` +
          `(${(r.cpuMs / r.open).toFixed(2)} ms per session); sent ${(r.bytes / 1e9).toFixed(2)} GB; longest event-loop stall ${r.stallMs.toFixed(0)} ms; sessions lost ${r.lost}`,
      );
    }
    console.log(`panel peak RSS: ${MiB(maxRss)}`);
    if (teardowns.length > 0) console.log(`teardowns: ${[...new Set(teardowns.map((t) => t.replace(/\d+/g, 'N')))].join(' | ')}`);
  } finally {
    for (const c of cleanups) await Promise.resolve(c()).catch(() => undefined);
  }
}

if (process.argv.includes('--agents')) runAgents();
else
  runPanel().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
