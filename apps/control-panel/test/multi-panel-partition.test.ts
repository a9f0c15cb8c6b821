import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLOSE_CODES } from '@tether/protocol';
import { startTcpRelay, startTestPostgres, waitFor, type TcpRelay, type TestPostgres } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// A panel partitioned from PostgreSQL only (a pausable TCP relay between it
// and the database; its agents and HTTP clients still reach it). With another
// live panel it stops claiming within its lease, reads its nodes unknown,
// answers /readyz 503 and closes its sessions so the agents move; when the
// relay resumes it holds its lease again and its late writes are fenced out.
// A lone panel partitioned the same way keeps its sessions and their status.

const LEASE_MS = 1_500;
const env = {
  TETHER_PANEL_LEASE_MS: String(LEASE_MS),
  TETHER_SESSION_IDLE_MS: '5000',
  TETHER_PING_INTERVAL_MS: '1000',
  TETHER_DB_CONNECT_TIMEOUT_MS: '500',
  TETHER_DB_QUERY_TIMEOUT_MS: '500',
  TETHER_READY_TIMEOUT_MS: '300',
};

let pg: TestPostgres;
const cleanup: (() => Promise<unknown> | unknown)[] = [];
beforeAll(async () => {
  pg = await startTestPostgres();
}, 60_000);
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
  await pg?.stop();
});

const container = (serviceId: string) => [
  { containerId: 'c1', serviceId, deploymentId: 'd1', name: 'x', state: 'running' as const, exitCode: null, health: 'none' as const, restartCount: 0, since: new Date().toISOString() },
];
const stateOn = async (panel: Panel, serviceId: string) => (await panel.api('GET', `/v1/services/${serviceId}/status`)).body?.state as string | undefined;

async function panelBehindRelay(databaseUrl: string, id: string): Promise<{ panel: Panel; relay: TcpRelay }> {
  const relay = await startTcpRelay(Number(new URL(databaseUrl).port));
  cleanup.push(() => relay.close());
  const panel = await startPanel({ databaseUrl: relay.via(databaseUrl), env: { ...env, TETHER_PANEL_ID: id } });
  cleanup.push(async () => {
    relay.resume();
    await panel.close();
  });
  return { panel, relay };
}

describe('partitioned from PostgreSQL', () => {
  it('with another live panel: B stops claiming within its lease, closes its sessions, the agent moves to A, B rejoins cleanly', async () => {
    const databaseUrl = await pg.createDatabase();
    const a = await startPanel({ databaseUrl, env: { ...env, TETHER_PANEL_ID: 'part-a' } });
    cleanup.push(() => a.close());
    const { panel: b, relay } = await panelBehindRelay(databaseUrl, 'part-b');
    const node = await a.createNode('part-node');
    const service = await a.createService(node.id);
    const agent = await RawAgent.connect({ url: b.url, token: node.token, node: node.name });
    cleanup.push(() => agent.close());
    agent.heartbeat(container(service.id));
    await waitFor(async () => (await stateOn(a, service.id)) === 'running', { timeoutMs: 3_000 });
    // Each panel has seen the other's live lease at a renewal.
    await waitFor(() => Boolean(a.app.panelStatus.ownership?.othersSeen && b.app.panelStatus.ownership?.othersSeen), { timeoutMs: LEASE_MS * 2 });

    relay.pause();
    const cutAt = Date.now();
    const closed = await agent.waitClosed(LEASE_MS + 2_000);
    expect(closed.code).toBe(CLOSE_CODES.GOING_AWAY);
    // B counts its lease from when it sent the last renewal: it gives up no later than the lease after the cut.
    expect(closed.at - cutAt).toBeLessThanOrEqual(LEASE_MS + 200);
    expect(b.app.panelStatus.ownership?.leaseHeld).toBe(false);
    const ready = await fetch(`${b.url}/readyz`);
    expect(ready.status).toBe(503);
    // A sees B's lease expire by PostgreSQL's clock: the node reads unknown there, never a stale running.
    await waitFor(async () => (await stateOn(a, service.id)) === 'unknown', { timeoutMs: LEASE_MS + 2_000 });

    // The agent moves to A; status is running again, from A's session.
    const moved = await RawAgent.connect({ url: a.url, token: node.token, node: node.name });
    cleanup.push(() => moved.close());
    moved.heartbeat(container(service.id));
    await waitFor(async () => (await stateOn(a, service.id)) === 'running', { timeoutMs: 3_000 });

    // The relay resumes: B holds its lease again (readiness back) and its queued close is fenced out of the node row.
    relay.resume();
    await waitFor(async () => (await fetch(`${b.url}/readyz`)).status === 200, { timeoutMs: LEASE_MS + 3_000 });
    await b.settled();
    const row = await a.prisma.node.findUniqueOrThrow({ where: { id: node.id } });
    expect(row.unreachableSince).toBeNull();
    const owner = await a.prisma.nodeOwner.findUniqueOrThrow({ where: { nodeId: node.id } });
    expect(owner).toMatchObject({ panelId: 'part-a', sessionId: moved.welcome.sessionId });
    await waitFor(async () => (await stateOn(b, service.id)) === 'running', { timeoutMs: 3_000 });
    expect(moved.closed).toBeNull();
  }, 60_000);

  it('a lone panel partitioned the same way keeps its sessions and their status, and claims again when the database returns', async () => {
    const databaseUrl = await pg.createDatabase();
    const { panel: lone, relay } = await panelBehindRelay(databaseUrl, 'part-lone');
    const node = await lone.createNode('lone-node');
    const service = await lone.createService(node.id);
    const agent = await RawAgent.connect({ url: lone.url, token: node.token, node: node.name });
    cleanup.push(() => agent.close());
    agent.heartbeat(container(service.id));
    await waitFor(async () => (await stateOn(lone, service.id)) === 'running', { timeoutMs: 3_000 });
    // GET /v1/status remembers the service rows it read, so it answers through the outage (as with one panel).
    expect((await lone.api('GET', '/v1/status')).status).toBe(200);
    relay.pause();
    await new Promise((r) => setTimeout(r, LEASE_MS * 2));
    expect(lone.app.panelStatus.ownership?.leaseHeld).toBe(false);
    expect(agent.closed).toBeNull();
    expect(lone.app.agentSide.registry.get(node.id)).toBeDefined();
    // Verified from outside: the session still answers pings, and status still says running (from memory, the session live).
    const pingsBefore = agent.received.filter((m) => m.type === 'ping').length;
    await agent.waitFor(() => agent.received.filter((m) => m.type === 'ping').length > pingsBefore, 3_000);
    const status = await lone.api('GET', '/v1/status');
    expect(status.status).toBe(200);
    expect(status.body.services.find((s: { serviceId: string }) => s.serviceId === service.id)?.state).toBe('running');

    relay.resume();
    await waitFor(() => lone.app.panelStatus.ownership?.leaseHeld === true, { timeoutMs: LEASE_MS + 3_000 });
    // Claims work again: a new session of another node is welcomed.
    const other = await lone.createNode('lone-other');
    const second = await RawAgent.connect({ url: lone.url, token: other.token, node: other.name });
    cleanup.push(() => second.close());
    expect(second.welcome.sessionId).toMatch(/^ses_/);
    expect(agent.closed).toBeNull();
  }, 60_000);
});
