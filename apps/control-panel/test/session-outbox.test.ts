import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import { spawnProcess, startFaultablePostgres, waitFor, type FaultablePostgres } from '@tether/testkit';
import { loadConfig } from '../src/config.js';
import { createPrisma, MIGRATIONS_DIR, type Db } from '../src/db/database.js';
import { applyMigrations } from '../src/db/migrate.js';
import { generateToken, hashToken } from '../src/domain/tokens.js';
import { startPanel as startRealPanel } from '../src/server.js';
import { PrismaFactWriter } from '../src/session-writes/fact-writer.js';
import { ORPHANED_REASON, type DurableFact } from '../src/session-writes/facts.js';
import { SessionFactOutbox } from '../src/session-writes/outbox.js';
import { SpillFile } from '../src/session-writes/spill-file.js';
import { startPanel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// The one write path for session facts, against a real PostgreSQL that goes
// away: order per node survives an outage, a panel restarted during one
// replays what it spilled exactly once, and a panel killed outright has its
// sessions closed in the history by the next start.

const SHORT = { TETHER_DB_CONNECT_TIMEOUT_MS: '800', TETHER_DB_QUERY_TIMEOUT_MS: '800', TETHER_OUTBOX_RETRY_MAX_MS: '200', TETHER_READY_TIMEOUT_MS: '300' };
const PANEL_MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');

let pg: FaultablePostgres;
const cleanup: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  pg = await startFaultablePostgres();
}, 60_000);
// A failed test must not leave the database away for the next one.
afterEach(async () => {
  pg.thaw();
  await pg.start();
});

afterAll(async () => {
  for (const f of cleanup.reverse()) await f().catch(() => undefined);
  await pg?.destroy();
});

async function database(): Promise<{ url: string; prisma: Db }> {
  const url = await pg.createDatabase();
  await applyMigrations(url, MIGRATIONS_DIR);
  const prisma = createPrisma(url, { connectTimeoutMs: 800, queryTimeoutMs: 800, poolSize: 4 });
  cleanup.push(() => prisma.$disconnect());
  return { url, prisma };
}

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-outbox-'));
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function createNode(prisma: Db, name: string) {
  const token = generateToken('node');
  const node = await prisma.node.create({ data: { name, tokenHash: hashToken(token) } });
  return { id: node.id, name, token };
}

const spillLines = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0);

describe('outbox order across an outage', () => {
  it("keeps each node's opens and closes in the order they were decided, and writes each once", async () => {
    const { prisma } = await database();
    const nodes = [await createNode(prisma, 'order-1'), await createNode(prisma, 'order-2')];
    const spill = new SpillFile(path.join(await tempDir(), 'facts.jsonl'));
    const outbox = new SessionFactOutbox({
      writer: new PrismaFactWriter(prisma, { maxWait: 800, timeout: 1_600 }),
      spill,
      logger: silentLogger,
      retryMinMs: 50,
      retryMaxMs: 200,
      maxPending: 10_000,
    });
    outbox.start();
    await pg.stop();

    // One timestamp for all: the history's order is then only the order of insertion.
    const at = new Date().toISOString();
    const opened = (n: (typeof nodes)[number], i: number): DurableFact => ({ kind: 'session.opened', nodeId: n.id, sessionId: `${n.name}-s${i}`, at });
    const closed = (n: (typeof nodes)[number], i: number): DurableFact => ({
      kind: 'session.closed',
      nodeId: n.id,
      sessionId: `${n.name}-s${i}`,
      code: 1000,
      reason: `end ${i}`,
      at,
      lastFrameAt: at,
      superseded: false,
    });
    // The two nodes' facts interleaved: 1 opens, 2 opens, 1 closes, 2 closes, 1 opens again, ...
    const order = [0, 1, 2, 3, 4].flatMap((i) => [opened(nodes[0]!, i), opened(nodes[1]!, i), closed(nodes[0]!, i), closed(nodes[1]!, i)]);
    const committed = order.map((f) => outbox.submit(f));
    await waitFor(() => outbox.isDegraded && spillLines(spill.file) === order.length, { timeoutMs: 5_000 });
    expect(outbox.stats.failedAttempts).toBeGreaterThan(0);

    await new Promise((r) => setTimeout(r, 1_000));
    await pg.start();
    await Promise.all(committed);
    expect(outbox.pending).toBe(0);
    expect(existsSync(spill.file)).toBe(false);

    const rows = await prisma.sessionEvent.findMany({ orderBy: { id: 'asc' } });
    expect(rows.map((r) => `${r.sessionId}:${r.kind}`)).toEqual(order.map((f) => `${(f as { sessionId: string }).sessionId}:${f.kind.split('.')[1]}`));
    for (const node of nodes) {
      const mine = rows.filter((r) => r.nodeId === node.id).map((r) => `${r.sessionId}:${r.kind}`);
      expect(mine).toEqual([0, 1, 2, 3, 4].flatMap((i) => [`${node.name}-s${i}:opened`, `${node.name}-s${i}:closed`]));
    }
    // Idempotent: the same facts again (a retry of a write that had committed) add nothing.
    await Promise.all(order.map((f) => outbox.submit(f)));
    expect(await prisma.sessionEvent.count()).toBe(order.length);
    await outbox.stop(1_000);
  }, 60_000);
});

describe('a fact the database refuses for good', () => {
  it('is discarded alone (logged, its promise rejected); the facts around it commit in order', async () => {
    const { prisma } = await database();
    const node = await createNode(prisma, 'poison-1');
    const errors: string[] = [];
    const logger = { ...silentLogger, error: (_fields: object, message?: string) => void errors.push(message ?? '') };
    const outbox = new SessionFactOutbox({ writer: new PrismaFactWriter(prisma, { maxWait: 800, timeout: 1_600 }), logger, retryMaxMs: 200, maxPending: 1_000 });
    const at = new Date().toISOString();
    outbox.start();
    const results = await Promise.allSettled([
      outbox.submit({ kind: 'session.opened', nodeId: node.id, sessionId: 'p-1', at }),
      // No such node: a foreign-key violation, which no retry can fix.
      outbox.submit({ kind: 'session.opened', nodeId: 'no-such-node', sessionId: 'p-2', at }),
      outbox.submit({ kind: 'session.closed', nodeId: node.id, sessionId: 'p-1', code: 1000, reason: 'done', at, lastFrameAt: at, superseded: false }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(outbox.stats.rejected).toBe(1);
    expect(errors).toEqual(['session fact could not be written and was discarded']);
    const rows = await prisma.sessionEvent.findMany({ orderBy: { id: 'asc' } });
    expect(rows.map((r) => `${r.sessionId}:${r.kind}`)).toEqual(['p-1:opened', 'p-1:closed']);
    await outbox.stop(1_000);
  });
});

describe('panel restarted during an outage', () => {
  it('spills the closes it could not write, and the next start replays them once, in order, before closing orphans', async () => {
    const dataDir = await tempDir();
    const url = await pg.createDatabase();
    const panel = await startPanel({ databaseUrl: url, dataDir, env: { ...SHORT, TETHER_SESSION_IDLE_MS: '5000' } });
    cleanup.push(() => panel.close());
    const nodes = [await panel.createNode('replay-1'), await panel.createNode('replay-2')];
    // One after the other, so the history's order is known.
    const agents: RawAgent[] = [];
    for (const n of nodes) {
      agents.push(await RawAgent.connect({ url: panel.url, token: n.token, node: n.name, heartbeatMs: 300 }));
      await waitFor(async () => (await panel.prisma.sessionEvent.count()) === agents.length);
    }
    const sessionIds = agents.map((a) => a.welcome.sessionId);

    await pg.stop();
    agents[0]!.close();
    await waitFor(() => panel.app.agentSide.registry.size === 1);
    // Stopping closes the other session (SERVICE_RESTART with a retry hint); the database is out, so both closes go to the spill file, in time.
    const stopping = performance.now();
    await panel.stopApp();
    expect(performance.now() - stopping).toBeLessThan(800 + 800 + 1_000);
    const file = path.join(dataDir, 'outbox', 'session-facts.jsonl');
    const spilled = readFileSync(file, 'utf8');
    expect(spilled.split('\n').filter(Boolean).map((l) => JSON.parse(l).fact.kind)).toEqual(['session.closed', 'session.closed']);

    await pg.start();
    await panel.restartApp();
    await waitFor(() => !existsSync(file) && panel.app.panelStatus.outbox.pending === 0, { timeoutMs: 5_000 });
    const expectHistory = async () => {
      const rows = await panel.prisma.sessionEvent.findMany({ orderBy: { id: 'asc' } });
      expect(rows.map((r) => [r.sessionId, r.kind])).toEqual([
        [sessionIds[0], 'opened'],
        [sessionIds[1], 'opened'],
        [sessionIds[0], 'closed'],
        [sessionIds[1], 'closed'],
      ]);
      expect(rows[2]!.reason).toMatch(/closed by agent/);
      expect(rows[3]!.reason).toBe('panel shutting down; retry-window-ms=1000');
    };
    await expectHistory();

    // A crash after the replay committed but before the file was removed: the next start replays it again, and nothing doubles.
    await panel.stopApp();
    writeFileSync(file, spilled);
    await panel.restartApp();
    await waitFor(() => !existsSync(file) && panel.app.panelStatus.outbox.pending === 0, { timeoutMs: 5_000 });
    expect(panel.app.panelStatus.outbox.replayed).toBe(2);
    await expectHistory();
  }, 60_000);
});

describe('panel killed with SIGKILL while sessions are open', () => {
  it('the next start closes them in the history with the crash reason, at their last-seen time', async () => {
    if (!existsSync(PANEL_MAIN)) throw new Error(`build the panel first: ${PANEL_MAIN} is missing`);
    const { url, prisma } = await database();
    const dataDir = await tempDir();
    const nodes = [await createNode(prisma, 'killed-1'), await createNode(prisma, 'killed-2')];
    const env = { DATABASE_URL: url, TETHER_DATA_DIR: dataDir, TETHER_PORT: '0', TETHER_LOG_LEVEL: 'warn', TETHER_ADMIN_TOKEN: 'sigkill-test-operator-token', TETHER_LAST_SEEN_FLUSH_MS: '200',
      // The restart keeps the panel's id, so it knows the killed run's sessions are its own (another id would wait for the lease).
      TETHER_PANEL_ID: 'sigkill-panel' };
    const child = spawnProcess(process.execPath, [PANEL_MAIN], { env });
    cleanup.push(() => child.stop(1_000));
    const [, panelUrl] = await child.waitForOutput(/listening on (http:\/\/\S+)/, 30_000);
    const agents = await Promise.all(nodes.map((n) => RawAgent.connect({ url: panelUrl!, token: n.token, node: n.name, heartbeatMs: 100 })));
    cleanup.push(async () => agents.forEach((a) => a.close()));
    const sessionIds = agents.map((a) => a.welcome.sessionId);
    await waitFor(async () => (await prisma.sessionEvent.count({ where: { kind: 'opened' } })) === 2);
    const opened = await prisma.sessionEvent.findMany({ where: { kind: 'opened' } });
    // Let a last-seen flush land after the opens.
    await waitFor(async () => {
      const rows = await prisma.node.findMany({ where: { id: { in: nodes.map((n) => n.id) } } });
      return rows.every((r) => r.lastSeenAt && r.lastSeenAt.getTime() > Math.max(...opened.map((o) => o.at.getTime())) + 300);
    });

    child.child.kill('SIGKILL');
    await child.exited();
    const killedAt = Date.now();
    await Promise.all(agents.map((a) => a.waitClosed()));
    const lastSeen = new Map((await prisma.node.findMany({ where: { id: { in: nodes.map((n) => n.id) } } })).map((n) => [n.id, n.lastSeenAt!]));
    expect(await prisma.sessionEvent.count({ where: { kind: 'closed' } })).toBe(0);

    const config = loadConfig({ ...env, TETHER_LOG_LEVEL: 'silent' });
    const restarted = await startRealPanel(config);
    cleanup.push(() => restarted.close());
    await waitFor(async () => (await prisma.sessionEvent.count({ where: { kind: 'closed' } })) === 2, { timeoutMs: 5_000 });
    for (const [i, node] of nodes.entries()) {
      const events = await prisma.sessionEvent.findMany({ where: { nodeId: node.id }, orderBy: { id: 'asc' } });
      expect(events.map((e) => [e.sessionId, e.kind])).toEqual([
        [sessionIds[i], 'opened'],
        [sessionIds[i], 'closed'],
      ]);
      const closed = events[1]!;
      expect(closed.reason).toBe(ORPHANED_REASON);
      expect(closed.closeCode).toBeNull();
      expect(closed.at.getTime()).toBe(lastSeen.get(node.id)!.getTime());
      expect(closed.at.getTime()).toBeLessThanOrEqual(killedAt);
      const row = await prisma.node.findUniqueOrThrow({ where: { id: node.id } });
      expect(row.lastTeardownReason).toBe(ORPHANED_REASON);
      expect(row.unreachableSince?.getTime()).toBe(closed.at.getTime());
    }
    // What an operator sees: unreachable, with the crash as the last teardown.
    const res = await fetch(`${restarted.url}/v1/sessions`, { headers: { authorization: 'Bearer sigkill-test-operator-token' } });
    const rows = ((await res.json()) as { sessions: { nodeName: string; state: string; lastTeardown: { reason: string } }[] }).sessions;
    for (const r of rows) expect(r).toMatchObject({ state: 'unreachable', lastTeardown: { reason: ORPHANED_REASON } });
  }, 90_000);
});
