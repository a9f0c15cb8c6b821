import WebSocket from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFaultablePostgres, waitFor, type FaultablePostgres } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// A real PostgreSQL taken away under a panel with live sessions: stopped
// (immediate shutdown) for 10 s, then frozen (SIGSTOP) for 5 s. The panel
// must answer within its bounds with a catalogued 503, keep its sessions and
// the reads that need no database, lose no history row, and be ready again
// within a second of the database's return.

const CONNECT_MS = 1_000;
const QUERY_MS = 1_000;
const READY_MS = 400;
/** Scheduling slack on a shared 2-core machine. */
const SLACK_MS = 700;
const DRIVER_TEXT = /prisma|ECONNREFUSED|postgres|connect|timeout exceeded|terminat|P10\d\d/i;

let pg: FaultablePostgres;
let panel: Panel;
const agents: RawAgent[] = [];

beforeAll(async () => {
  pg = await startFaultablePostgres();
  panel = await startPanel({
    databaseUrl: pg.url,
    env: {
      TETHER_DB_CONNECT_TIMEOUT_MS: String(CONNECT_MS),
      TETHER_DB_QUERY_TIMEOUT_MS: String(QUERY_MS),
      TETHER_READY_TIMEOUT_MS: String(READY_MS),
      TETHER_OUTBOX_RETRY_MAX_MS: '300',
      TETHER_SESSION_IDLE_MS: '3000',
      TETHER_PING_INTERVAL_MS: '1000',
      TETHER_LAST_SEEN_FLUSH_MS: '500',
    },
  });
  for (const name of ['outage-a', 'outage-b', 'outage-c']) {
    const node = await panel.createNode(name);
    agents.push(await RawAgent.connect({ url: panel.url, token: node.token, node: name, heartbeatMs: 300 }));
  }
  await waitFor(() => panel.app.agentSide.registry.size === 3);
  // Remembered reads: the status list as an operator saw it before the outage.
  expect((await panel.api('GET', '/v1/status')).status).toBe(200);
  expect((await panel.api('GET', '/v1/sessions')).status).toBe(200);
  await waitFor(() => panel.app.panelStatus.outbox.pending === 0);
}, 60_000);

// A failed test must not leave the database away for the next one.
afterEach(async () => {
  pg.thaw();
  await pg.start();
});

afterAll(async () => {
  for (const a of agents) a.close();
  await panel?.close();
  await pg?.destroy();
});

/** An agent's upgrade: the HTTP status and body when refused. */
async function upgrade(token: string): Promise<{ status: number; retryAfter: string | undefined; body: string }> {
  const url = new URL(panel.url);
  url.protocol = 'ws:';
  url.pathname = '/v1/agent/connect';
  const socket = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
  return new Promise((resolve, reject) => {
    socket.once('open', () => {
      socket.terminate();
      resolve({ status: 101, retryAfter: undefined, body: '' });
    });
    socket.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, body }));
    });
    socket.once('error', reject);
  });
}

async function timed(path: string): Promise<{ status: number; ms: number; body: any; headers: Headers }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const started = performance.now();
  const res = await fetch(panel.url + path, { headers: { authorization: `Bearer ${panel.operatorToken}` } });
  const text = await res.text();
  return { status: res.status, ms: performance.now() - started, body: text ? JSON.parse(text) : null, headers: res.headers };
}

function expectUnavailable(r: { status: number; body: any; headers: Headers }, code = 'DATABASE_UNAVAILABLE') { // eslint-disable-line @typescript-eslint/no-explicit-any
  expect(r.status).toBe(503);
  expect(r.body.error.code).toBe(code);
  expect(r.headers.get('retry-after')).toBe('5');
  expect(r.body.error.message).not.toMatch(DRIVER_TEXT);
}

async function history(nodeName: string) {
  const node = await panel.prisma.node.findUniqueOrThrow({ where: { name: nodeName } });
  return panel.prisma.sessionEvent.findMany({ where: { nodeId: node.id }, orderBy: [{ at: 'asc' }, { id: 'asc' }] });
}

describe('database stopped for 10 s with three live sessions', () => {
  it('answers 503 within its bound, keeps sessions and memory reads, records a session dropped meanwhile, ready within 1 s of return', async () => {
    const registry = panel.app.agentSide.registry;
    const sessionIds = agents.map((a) => a.welcome.sessionId);
    const extra = await panel.createNode('outage-late');
    // A deployment delivered to node a, and a valid customer token the database never verified for this panel.
    const service = await panel.createService(agents[0]!.welcome.nodeId);
    const deployment = await panel.prisma.deployment.create({
      data: { serviceId: service.id, nodeId: agents[0]!.welcome.nodeId, spec: {}, status: 'delivered', sessionId: sessionIds[0] },
    });
    const customer = await panel.api('POST', `/v1/teams/${service.teamId}/tokens`, { name: 'never used' });
    expect(customer.status).toBe(201);
    await pg.stop();
    const outageStarted = Date.now();

    // REST that needs the database: 503 at once (a stopped server refuses), never 500.
    const teams = await timed('/v1/teams');
    expectUnavailable(teams);
    expect(teams.ms).toBeLessThan(CONNECT_MS + SLACK_MS);
    const ready = await timed('/readyz');
    expectUnavailable(ready, 'NOT_READY');
    expect(ready.ms).toBeLessThan(READY_MS + SLACK_MS);
    expect(ready.body.error.message).toBe('not ready: the database did not answer');

    // An agent connecting now is refused with the same code before the upgrade (it backs off and retries).
    const refused = await upgrade(extra.token);
    expect(refused.status).toBe(503);
    expect(refused.retryAfter).toBe('5');
    expect(JSON.parse(refused.body).error.code).toBe('DATABASE_UNAVAILABLE');

    // Reads that need no database keep answering, from the connected map and the last node list.
    const sessions = await timed('/v1/sessions');
    expect(sessions.status).toBe(200);
    expect(sessions.headers.get('x-tether-from-memory')).toMatch(/^\d{4}-/);
    const byName = new Map<string, { state: string; sessionId: string }>(sessions.body.sessions.map((s: { nodeName: string }) => [s.nodeName, s]));
    for (const [i, name] of ['outage-a', 'outage-b', 'outage-c'].entries()) {
      expect(byName.get(name)).toMatchObject({ state: 'connected', sessionId: sessionIds[i] });
    }
    const status = await timed('/v1/status');
    expect(status.status).toBe(200);
    expect(status.headers.get('x-tether-from-memory')).not.toBeNull();
    // A token the panel has not verified before cannot be checked now: 503, never 401.
    const unverified = await panel.api('GET', '/v1/status', undefined, customer.body.token);
    expect(unverified.status).toBe(503);
    expect(unverified.body.error.code).toBe('DATABASE_UNAVAILABLE');

    // The agent reports the deployment's result during the outage: held, and written afterwards.
    const resultSentAt = Date.now();
    agents[0]!.send({ type: 'deploy.result', id: 'result-1', deploymentId: deployment.id, status: 'running', reason: 'healthy', code: null });

    // One session ends during the outage: torn down at once, its close held for the database.
    agents[2]!.close();
    await waitFor(() => registry.size === 2);
    expect(panel.app.panelStatus.outbox.pending).toBeGreaterThan(0);
    // What an operator's dashboard shows meanwhile.
    const during = await (await fetch(`${panel.url}/metrics`)).text();
    expect(Number(/^tether_session_facts_pending (\d+)$/m.exec(during)?.[1])).toBeGreaterThan(0);
    expect(Number(/^tether_session_facts_spilled_total (\d+)$/m.exec(during)?.[1])).toBeGreaterThan(0);

    // The rest of the 10 s: the other sessions stay, on the same session ids.
    await new Promise((r) => setTimeout(r, 10_000 - (Date.now() - outageStarted)));
    expect(registry.get(agents[0]!.welcome.nodeId)?.id).toBe(sessionIds[0]);
    expect(registry.get(agents[1]!.welcome.nodeId)?.id).toBe(sessionIds[1]);
    expect(agents[0]!.closed).toBeNull();

    await pg.start();
    const back = performance.now();
    await waitFor(async () => (await fetch(panel.url + '/readyz')).status === 200, { timeoutMs: 3_000, intervalMs: 25 });
    const readyAfter = performance.now() - back;
    expect(readyAfter).toBeLessThan(1_000);
    expect((await timed('/v1/teams')).status).toBe(200);

    // Nothing lost: the session that ended meanwhile is opened and then closed, in that order.
    await waitFor(() => panel.app.panelStatus.outbox.pending === 0, { timeoutMs: 5_000 });
    expect(await (await fetch(`${panel.url}/metrics`)).text()).toMatch(/^tether_session_facts_pending 0$/m);
    const c = await history('outage-c');
    expect(c.map((e) => [e.sessionId, e.kind])).toEqual([
      [sessionIds[2], 'opened'],
      [sessionIds[2], 'closed'],
    ]);
    expect(c[1]!.at.getTime()).toBeGreaterThanOrEqual(outageStarted);
    for (const name of ['outage-a', 'outage-b']) expect((await history(name)).map((e) => e.kind)).toEqual(['opened']);
    const finished = await panel.prisma.deployment.findUniqueOrThrow({ where: { id: deployment.id } });
    expect(finished).toMatchObject({ status: 'running', reason: 'healthy' });
    // Recorded at the time it happened, not when the database came back.
    expect(Math.abs(finished.finishedAt!.getTime() - resultSentAt)).toBeLessThan(1_000);
    // The late node's agent gets in now.
    expect((await upgrade(extra.token)).status).toBe(101);
  }, 60_000);
});

describe('database frozen for 5 s', () => {
  it('answers /readyz and REST with 503 within their bounds during the freeze, and recovers after SIGCONT', async () => {
    const registry = panel.app.agentSide.registry;
    await waitFor(async () => (await fetch(panel.url + '/readyz')).status === 200);
    pg.freeze();
    const frozenAt = Date.now();

    const ready = await timed('/readyz');
    expectUnavailable(ready, 'NOT_READY');
    // Bounded both ways: a frozen server refuses nothing, so the deadline is what answers.
    expect(ready.ms).toBeGreaterThanOrEqual(READY_MS - 50);
    expect(ready.ms).toBeLessThan(READY_MS + SLACK_MS);

    const [teams, nodes] = await Promise.all([timed('/v1/teams'), timed('/v1/nodes')]);
    for (const r of [teams, nodes]) {
      expectUnavailable(r);
      expect(r.ms).toBeGreaterThanOrEqual(Math.min(CONNECT_MS, QUERY_MS) - 50);
      expect(r.ms).toBeLessThan(CONNECT_MS + QUERY_MS + SLACK_MS);
    }
    // Memory reads: the database is known down now, so they answer without waiting out a deadline.
    const sessions = await timed('/v1/sessions');
    expect(sessions.status).toBe(200);
    expect(sessions.headers.get('x-tether-from-memory')).not.toBeNull();
    expect(sessions.ms).toBeLessThan(Math.min(CONNECT_MS, QUERY_MS));

    await new Promise((r) => setTimeout(r, Math.max(0, 5_000 - (Date.now() - frozenAt))));
    expect(registry.size).toBe(2);
    pg.thaw();
    const thawed = performance.now();
    await waitFor(async () => (await fetch(panel.url + '/readyz')).status === 200, { timeoutMs: 3_000, intervalMs: 25 });
    expect(performance.now() - thawed).toBeLessThan(1_000);
    expect((await timed('/v1/teams')).status).toBe(200);
    expect((await timed('/v1/nodes')).status).toBe(200);
    expect(registry.size).toBe(2);
  }, 30_000);
});
