import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLOSE_CODES } from '@tether/protocol';
import { blackhole, ensureIptables, freePort, spawnProcess, startTestPostgres, waitFor, type TestPostgres } from '@tether/testkit';
import { EXPIRED_OWNER_REASON } from '../src/session-writes/facts.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { startAgentProcess } from './helpers/agent-process.js';
import { RawAgent } from './helpers/raw-agent.js';

// Several panels on one PostgreSQL (issue 10), each a real HTTP/WebSocket
// server with its own pool, lease and LISTEN connection: deploys dispatched
// across panels, status read from any panel, supersede across panels, and a
// panel killed with SIGKILL (a real process) whose nodes read unknown on the
// others within lease + 2 s and whose agents rejoin another panel.

const LEASE_MS = 1_500;
const ACK_MS = 600;
const DEBOUNCE_MS = 500;
const PANEL_MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');
const env = {
  TETHER_PANEL_LEASE_MS: String(LEASE_MS),
  TETHER_ACK_TIMEOUT_MS: String(ACK_MS),
  TETHER_SESSION_IDLE_MS: '5000',
  TETHER_PING_INTERVAL_MS: '1000',
  TETHER_ROUTING_DEBOUNCE_MS: String(DEBOUNCE_MS),
  TETHER_FLEET_REFRESH_MS: '200',
};

let pg: TestPostgres;
let databaseUrl: string;
let a: Panel;
let b: Panel;
let c: Panel;
const cleanup: (() => Promise<unknown> | unknown)[] = [];

beforeAll(async () => {
  pg = await startTestPostgres();
  databaseUrl = await pg.createDatabase();
  const start = (id: string) => startPanel({ databaseUrl, env: { ...env, TETHER_PANEL_ID: `panel-${id}` } });
  [a, b, c] = await Promise.all([start('a'), start('b'), start('c')]);
  // As startPanels does: a panel reaches another through the internal URL that one writes with its lease after it
  // listens; a deploy forwarded before then is 503 OWNER_PANEL_NO_INTERNAL_URL (seen once under a loaded CI run).
  await waitFor(async () => (await a.prisma.panel.count({ where: { internalUrl: { not: null }, internalSecretHash: { not: null } } })) === 3);
  for (const panel of [a, b, c]) await waitFor(async () => (await fetch(`${panel.url}/readyz`)).status === 200);
}, 60_000);
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
  await Promise.all([a, b, c].map((p) => p?.close()));
  await pg?.stop();
});

type Status = { state: string; runningReplicas: number | null; evidence: { sessionId: string; panelId?: string } | null; containers: unknown[] };
const statusOn = async (panel: Panel, serviceId: string) => (await panel.api('GET', `/v1/services/${serviceId}/status`)).body as Status;

const running = (serviceId: string, deploymentId: string) => [
  { containerId: 'c1', serviceId, deploymentId, name: 'x', state: 'running' as const, exitCode: null, health: 'none' as const, restartCount: 0, since: new Date().toISOString() },
];

describe('several panels on one database', () => {
  it('deploy through A to a node owned by B answers 202; C and A read the status B reports, naming B', async () => {
    const node = await a.createNode('mp-deploy');
    const service = await a.createService(node.id);
    // No periodic heartbeats: the one sent below (with the container) stays the report; pongs keep the session alive.
    const agent = await RawAgent.connect({ url: b.url, token: node.token, node: node.name });
    cleanup.push(() => agent.close());
    const owner = await a.prisma.nodeOwner.findUniqueOrThrow({ where: { nodeId: node.id } });
    expect(owner).toMatchObject({ panelId: 'panel-b', sessionId: agent.welcome.sessionId });

    const res = await a.api('POST', `/v1/services/${service.id}/deployments`, {});
    expect(res.status, `${JSON.stringify(res.body)}\npanel A:\n${a.recentLogs()}`).toBe(202);
    expect(res.body).toMatchObject({ status: 'delivered', sessionId: agent.welcome.sessionId });
    const sent = await agent.waitFor((m) => m.type === 'deploy');
    expect(sent).toMatchObject({ workload: { deploymentId: res.body.id } });

    // The agent reports the container on its session with B; A and C answer from B's report row.
    agent.heartbeat(running(service.id, res.body.id));
    const onB = await waitFor(async () => {
      const s = await statusOn(b, service.id);
      return s.state === 'running' ? s : undefined;
    });
    for (const panel of [a, c]) {
      const s = await waitFor(async () => {
        const got = await statusOn(panel, service.id);
        return got.state === 'running' ? got : undefined;
      }, { timeoutMs: 3_000 });
      expect(s.evidence).toMatchObject({ sessionId: agent.welcome.sessionId, panelId: 'panel-b' });
      expect(s.containers).toEqual(onB.containers);
      // Session health names the same session and panel, once.
      const rows = (await panel.api('GET', '/v1/sessions')).body.sessions.filter((r: { nodeId: string }) => r.nodeId === node.id);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ state: 'connected', sessionId: agent.welcome.sessionId, panelId: 'panel-b', agentVersion: 'test' });
      // The fleet page's row on this panel: reachable, from B's session (not "unreachable" because the session is elsewhere).
      const signIn = await fetch(`${panel.url}/dashboard/api/sign-in`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: panel.url },
        body: JSON.stringify({ token: panel.operatorToken }),
      });
      const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
      const row = await waitFor(async () => {
        const got = (await (await fetch(`${panel.url}/dashboard/api/nodes/${node.id}`, { headers: { cookie } })).json()) as { row: { state: string; sessionId: string | null } };
        return got.row.state === 'reachable' ? got.row : undefined;
      }, { timeoutMs: 3_000 });
      expect(row.sessionId).toBe(agent.welcome.sessionId);
    }
  });

  it('only the owner exports a node\'s per-node metrics', async () => {
    const node = await a.createNode('mp-metrics');
    const line = `tether_node_reachable{node="mp-metrics"}`;
    const metricsOf = async (panel: Panel) => (await fetch(`${panel.url}/metrics`)).text();
    // First on A (so A knows the node: without the rule it would export it as 0 once the node moves), then on B.
    const first = await RawAgent.connect({ url: a.url, token: node.token, node: node.name });
    cleanup.push(() => first.close());
    await waitFor(async () => (await metricsOf(a)).includes(`${line} 1`), { timeoutMs: 8_000 });
    const agent = await RawAgent.connect({ url: b.url, token: node.token, node: node.name });
    cleanup.push(() => agent.close());
    await first.waitClosed(2_000);
    await waitFor(async () => (await metricsOf(b)).includes(`${line} 1`), { timeoutMs: 8_000 });
    // The other panels learn at their next renewal (a third of the lease) that B holds it, and leave it out,
    // also once their node directory (re-read every 200 ms here) knows the node was seen.
    await new Promise((r) => setTimeout(r, LEASE_MS));
    for (let i = 0; i < 5; i++) {
      expect(await metricsOf(a)).not.toContain(line);
      expect(await metricsOf(c)).not.toContain(line);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await metricsOf(b)).toContain(`${line} 1`);
  }, 20_000);

  it('an owner that does not get the ACK answers 504 ACK_TIMEOUT through A; no owner at all answers 503 at once', async () => {
    const node = await a.createNode('mp-noack');
    const service = await a.createService(node.id);
    const agent = await RawAgent.connect({ url: b.url, token: node.token, node: node.name, ack: ['workloads', 'routing.map'] });
    cleanup.push(() => agent.close());
    const res = await a.api('POST', `/v1/services/${service.id}/deployments`, {});
    expect(res.status).toBe(504);
    expect(res.body.error.code).toBe('ACK_TIMEOUT');
    expect(res.ms).toBeGreaterThanOrEqual(ACK_MS - 50);
    expect(res.ms).toBeLessThan(ACK_MS + 1_000);
    const row = await a.prisma.deployment.findFirstOrThrow({ where: { serviceId: service.id }, orderBy: { createdAt: 'desc' } });
    expect(row.status).toBe('ack_timeout');
    await agent.waitClosed();

    const lonely = await a.createNode('mp-never');
    const svc = await a.createService(lonely.id);
    const none = await c.api('POST', `/v1/services/${svc.id}/deployments`, {});
    expect(none.status).toBe(503);
    expect(none.body.error.code).toBe('NODE_UNREACHABLE');
    expect(none.ms).toBeLessThan(300);
  });

  it('supersede across panels: the node reconnects to C; B closes its session as superseded within 1 s; never shown twice', async () => {
    const node = await a.createNode('mp-move');
    const service = await a.createService(node.id);
    const old = await RawAgent.connect({ url: b.url, token: node.token, node: node.name, heartbeatMs: 100 });
    cleanup.push(() => old.close());
    const fresh = await RawAgent.connect({ url: c.url, token: node.token, node: node.name, heartbeatMs: 100 });
    cleanup.push(() => fresh.close());
    const welcomedAt = Date.now();
    const closed = await old.waitClosed(2_000);
    expect(closed.code).toBe(CLOSE_CODES.SUPERSEDED);
    expect(closed.at - welcomedAt).toBeLessThan(1_000);
    expect(b.app.agentSide.registry.get(node.id)).toBeUndefined();
    expect(c.app.agentSide.registry.get(node.id)?.id).toBe(fresh.welcome.sessionId);
    // The node row stays reachable (B's close was fenced out), and every panel names C's session.
    await c.settled();
    await b.settled();
    const row = await a.prisma.node.findUniqueOrThrow({ where: { id: node.id } });
    expect(row.unreachableSince).toBeNull();
    for (const panel of [a, b, c]) {
      const s = await waitFor(async () => {
        const got = await statusOn(panel, service.id);
        return got.evidence?.sessionId === fresh.welcome.sessionId ? got : undefined;
      }, { timeoutMs: 3_000 });
      expect(s.evidence?.panelId).toBe('panel-c');
    }
    // Deploys through B (the old owner) reach the node on C.
    const res = await b.api('POST', `/v1/services/${service.id}/deployments`, {});
    expect(res.status).toBe(202);
    await fresh.waitFor((m) => m.type === 'deploy');
  });

  it('a node declared lost through A while B holds its session: B closes it with 4005 within 1 s and refuses its token from then on', async () => {
    const node = await a.createNode('mp-lost');
    const agent = await RawAgent.connect({ url: b.url, token: node.token, node: node.name, heartbeatMs: 100 });
    cleanup.push(() => agent.close());
    const declaredAt = Date.now();
    expect((await a.api('POST', `/v1/nodes/${node.id}/lost`, { confirm: true })).status).toBe(200);
    const closed = await agent.waitClosed(2_000);
    expect(closed.code).toBe(CLOSE_CODES.DECOMMISSIONED);
    expect(closed.at - declaredAt).toBeLessThan(1_000);
    // B had verified the token (its cache); the signal made it forget: refused at once, not after the cache's bound.
    await expect(RawAgent.connect({ url: b.url, token: node.token, node: node.name })).rejects.toThrow(/403/);
  });

  it('supersede of a half-open session (iptables): the node reconnects to C; B drops its session within 1 s; one row everywhere', async () => {
    await ensureIptables();
    const node = await a.createNode('mp-halfopen-move');
    const service = await a.createService(node.id);
    const old = await RawAgent.connect({ url: b.url, token: node.token, node: node.name });
    cleanup.push(() => old.close());
    const oldSession = old.welcome.sessionId;
    // Every packet of the old connection dropped both ways: no FIN, no RST, B's socket stays open.
    const hole = blackhole((old.socket as unknown as { _socket: { localPort: number } })._socket.localPort);
    cleanup.push(() => hole.release());
    const fresh = await RawAgent.connect({ url: c.url, token: node.token, node: node.name });
    cleanup.push(() => fresh.close());
    const welcomedAt = Date.now();
    await waitFor(() => b.app.agentSide.registry.get(node.id) === undefined, { timeoutMs: 1_000, intervalMs: 10 });
    expect(Date.now() - welcomedAt).toBeLessThan(1_000);
    await b.settled();
    const closed = await a.prisma.sessionEvent.findFirstOrThrow({ where: { sessionId: oldSession, kind: 'closed' } });
    expect(closed.closeCode).toBe(CLOSE_CODES.SUPERSEDED);
    // C's report row is written within its urgent window (50 ms); every panel then names C's session, once.
    for (const panel of [a, b, c]) {
      const rows = await waitFor(async () => {
        const got = (await panel.api('GET', '/v1/sessions')).body.sessions.filter((r: { nodeId: string }) => r.nodeId === node.id);
        return got[0]?.state === 'connected' ? got : undefined;
      }, { timeoutMs: 1_000, intervalMs: 20 });
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ state: 'connected', sessionId: fresh.welcome.sessionId, panelId: 'panel-c' });
      const status = await statusOn(panel, service.id);
      expect(status.evidence?.sessionId ?? fresh.welcome.sessionId).toBe(fresh.welcome.sessionId);
    }
    hole.release();
  });

  it('a route created through C reaches the owner B, which pushes the node its map', async () => {
    const node = await a.createNode('mp-route');
    const service = await a.createService(node.id);
    const agent = await RawAgent.connect({ url: b.url, token: node.token, node: node.name });
    cleanup.push(() => agent.close());
    await a.api('POST', `/v1/services/${service.id}/deployments`, {});
    const before = agent.received.filter((m) => m.type === 'routing.map').length;
    const route = await c.api('POST', '/v1/routes', { domain: 'mp-route.example.test', serviceId: service.id });
    expect(route.status).toBe(201);
    const map = await agent.waitFor((m) => m.type === 'routing.map' && JSON.stringify(m).includes('mp-route.example.test'), 3_000);
    expect(map).toBeDefined();
    expect(agent.received.filter((m) => m.type === 'routing.map').length).toBeGreaterThan(before);
  });
});

/** A panel process (dist/main.js) on the shared database. */
async function panelProcess(id: string, port = 0) {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tether-mp-'));
  cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
  const child = spawnProcess(process.execPath, [PANEL_MAIN], {
    env: { ...env, DATABASE_URL: databaseUrl, TETHER_DATA_DIR: dataDir, TETHER_PORT: String(port), TETHER_LOG_LEVEL: 'warn', TETHER_PANEL_ID: id, TETHER_ADMIN_TOKEN: 'multi-panel-test-operator-token' },
  });
  cleanup.push(() => child.stop(1_000));
  const [, url] = await child.waitForOutput(/listening on (http:\/\/\S+)/, 30_000);
  return { child, url: url! };
}

describe('several panels: liveness and pushes', () => {
  it('a half-open session on B reads unknown on every panel within the idle deadline + 2 s; the agent reconnecting to C is running again', async () => {
    const node = await a.createNode('mp-halfopen');
    const service = await a.createService(node.id);
    const agent = await RawAgent.connect({ url: b.url, token: node.token, node: node.name });
    cleanup.push(() => agent.close());
    agent.heartbeat(running(service.id, 'd-half'));
    await waitFor(async () => (await statusOn(a, service.id)).state === 'running', { timeoutMs: 3_000 });
    agent.goSilent();
    const silentAt = Date.now();
    const idleMs = Number(env.TETHER_SESSION_IDLE_MS);
    const unknownAt = await Promise.all(
      [a, b, c].map((p) => waitFor(async () => ((await statusOn(p, service.id)).state === 'unknown' ? Date.now() : undefined), { timeoutMs: idleMs + 3_000, intervalMs: 50 })),
    );
    for (const at of unknownAt) {
      // Not before the deadline (liveness is the deploy channel), and at most 2 s after it on any panel.
      expect(at - silentAt).toBeGreaterThanOrEqual(idleMs - 1_100);
      expect(at - silentAt).toBeLessThan(idleMs + 2_000);
    }
    const back = await RawAgent.connect({ url: c.url, token: node.token, node: node.name });
    cleanup.push(() => back.close());
    back.heartbeat(running(service.id, 'd-half'));
    await waitFor(async () => (await statusOn(a, service.id)).evidence?.panelId === 'panel-c', { timeoutMs: 3_000 });
  }, 30_000);

  it('20 route changes in a burst through A and C reach the owner B, which pushes the node once', async () => {
    const node = await a.createNode('mp-burst');
    const service = await a.createService(node.id);
    const agent = await RawAgent.connect({ url: b.url, token: node.token, node: node.name });
    cleanup.push(() => agent.close());
    await a.api('POST', `/v1/services/${service.id}/deployments`, {});
    // Let the pushes of the open and the deploy pass.
    await new Promise((r) => setTimeout(r, 1_500));
    const maps = () => agent.received.filter((m) => m.type === 'routing.map');
    const before = maps().length;
    const sentAt = Date.now();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 ? a : c).api('POST', '/v1/routes', { domain: `burst-${i}.example.test`, serviceId: service.id })),
    );
    const spanMs = Date.now() - sentAt;
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(201));
    await waitFor(() => maps().length > before, { timeoutMs: 3_000 });
    await new Promise((r) => setTimeout(r, 1_500));
    // B's window is fixed from the first change it hears (routing-reconciler.ts: a trickle cannot hold it open), so
    // a burst that took longer than the window on a loaded machine is one push per window it spans, never one per change.
    console.log(`burst of 20 route changes through A and C: answered within ${spanMs} ms; B pushed ${maps().length - before} time(s) (window ${DEBOUNCE_MS} ms)`);
    expect(maps().length - before).toBeLessThanOrEqual(spanMs < DEBOUNCE_MS ? 1 : 1 + Math.ceil(spanMs / DEBOUNCE_MS));
    expect(maps().length - before).toBeGreaterThanOrEqual(1);
    const text = JSON.stringify(maps().at(-1));
    for (let i = 0; i < 20; i++) expect(text).toContain(`burst-${i}.example.test`);
  }, 30_000);
});

describe('dispatch across panels: overhead', () => {
  it('a deploy through A to B costs little more than one through B itself (figures printed; p50 overhead under 50 ms)', async () => {
    const node = await a.createNode('mp-latency');
    const service = await a.createService(node.id);
    const agent = await RawAgent.connect({ url: b.url, token: node.token, node: node.name });
    cleanup.push(() => agent.close());
    const times = async (panel: Panel, n: number) => {
      const ms: number[] = [];
      for (let i = 0; i < n; i++) {
        const res = await panel.api('POST', `/v1/services/${service.id}/deployments`, {});
        expect(res.status).toBe(202);
        ms.push(res.ms);
      }
      return ms.sort((x, y) => x - y);
    };
    await times(a, 5);
    const local = await times(b, 60);
    const remote = await times(a, 60);
    const q = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;
    console.log(
      `deploy answer ms, 60 each: local (through B) p50 ${q(local, 0.5).toFixed(1)} p99 ${q(local, 0.99).toFixed(1)}; ` +
        `remote (through A, owner B) p50 ${q(remote, 0.5).toFixed(1)} p99 ${q(remote, 0.99).toFixed(1)}`,
    );
    expect(q(remote, 0.5) - q(local, 0.5)).toBeLessThan(50);
  }, 60_000);
});

describe('a panel killed with SIGKILL', () => {
  it('a real agent given two panel URLs moves to the other panel, and deploys through A reach it there', async () => {
    if (!existsSync(PANEL_MAIN)) throw new Error(`build the panel first: ${PANEL_MAIN} is missing`);
    const node = await a.createNode('mp-real-agent');
    const service = await a.createService(node.id);
    const first = await panelProcess('panel-first');
    // The second URL has no panel yet: the agent can only settle on the first, whatever order it tries.
    const sparePort = await freePort();
    const agent = await startAgentProcess({ panelUrl: `${first.url},http://127.0.0.1:${sparePort}`, token: node.token, nodeName: node.name });
    cleanup.push(() => agent.destroy());
    await waitFor(async () => (await a.prisma.nodeOwner.findUnique({ where: { nodeId: node.id } }))?.panelId === 'panel-first', { timeoutMs: 10_000 });
    await panelProcess('panel-spare', sparePort);

    first.child.child.kill('SIGKILL');
    const killedAt = Date.now();
    await waitFor(async () => (await a.prisma.nodeOwner.findUnique({ where: { nodeId: node.id } }))?.panelId === 'panel-spare', { timeoutMs: 10_000, intervalMs: 50 });
    // The agent's idle deadline does not wait for the dead panel: the kill closes the socket, it reconnects within its backoff.
    expect(Date.now() - killedAt).toBeLessThan(3_000);
    const res = await a.api('POST', `/v1/services/${service.id}/deployments`, {});
    expect(res.status).toBe(202);
    const rows = (await c.api('GET', '/v1/sessions')).body.sessions.filter((r: { nodeId: string }) => r.nodeId === node.id);
    await waitFor(async () => {
      const row = (await c.api('GET', '/v1/sessions')).body.sessions.find((r: { nodeId: string }) => r.nodeId === node.id);
      return row?.state === 'connected' && row.panelId === 'panel-spare';
    }, { timeoutMs: 3_000 });
    expect(rows).toHaveLength(1);
  }, 60_000);


  it('its nodes read unknown on the others within lease + 2 s, deploys through them settle, and its agents rejoin another panel', async () => {
    if (!existsSync(PANEL_MAIN)) throw new Error(`build the panel first: ${PANEL_MAIN} is missing`);
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tether-mp-'));
    cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
    const node = await a.createNode('mp-killed');
    const service = await a.createService(node.id);
    const child = spawnProcess(process.execPath, [PANEL_MAIN], {
      env: { ...env, DATABASE_URL: databaseUrl, TETHER_DATA_DIR: dataDir, TETHER_PORT: '0', TETHER_LOG_LEVEL: 'warn', TETHER_PANEL_ID: 'panel-k', TETHER_ADMIN_TOKEN: 'multi-panel-test-operator-token' },
    });
    cleanup.push(() => child.stop(1_000));
    const [, killedUrl] = await child.waitForOutput(/listening on (http:\/\/\S+)/, 30_000);
    const agent = await RawAgent.connect({ url: killedUrl!, token: node.token, node: node.name });
    cleanup.push(() => agent.close());
    const deployed = await a.api('POST', `/v1/services/${service.id}/deployments`, {});
    expect(deployed.status).toBe(202);
    agent.heartbeat(running(service.id, deployed.body.id));
    await waitFor(async () => (await statusOn(c, service.id)).state === 'running', { timeoutMs: 3_000 });

    child.child.kill('SIGKILL');
    const killedAt = Date.now();
    // A deploy through A right away: the dead owner's lease still looks live, so A signals it, waits ACK + 2 s, settles.
    const orphanDeploy = await a.api('POST', `/v1/services/${service.id}/deployments`, {});
    await agent.waitClosed();
    const unknownOn = async (panel: Panel) =>
      waitFor(async () => ((await statusOn(panel, service.id)).state === 'unknown' ? Date.now() : undefined), { timeoutMs: LEASE_MS + 3_000, intervalMs: 50 });
    const [onA, onC] = await Promise.all([unknownOn(a), unknownOn(c)]);
    const row = (await a.api('GET', '/v1/sessions')).body.sessions.find((r: { nodeId: string }) => r.nodeId === node.id);
    expect(row.state).not.toBe('connected');
    expect(Math.max(onA, onC) - killedAt).toBeLessThan(LEASE_MS + 2_000);
    expect(orphanDeploy.status).toBe(503);
    expect(orphanDeploy.body.error.code).toBe('NODE_UNREACHABLE');
    expect(orphanDeploy.ms).toBeLessThan(ACK_MS + 2_000 + 1_000);
    // No deployment is left pending.
    expect(await a.prisma.deployment.count({ where: { serviceId: service.id, status: 'pending' } })).toBe(0);
    // The sweep on a live panel closes the dead panel's session in the history.
    await waitFor(async () => (await a.prisma.sessionEvent.findFirst({ where: { sessionId: agent.welcome.sessionId, kind: 'closed' } }))?.reason === EXPIRED_OWNER_REASON, { timeoutMs: LEASE_MS * 2 });

    // The agent rejoins another panel; status is running again from that session, and deploys work.
    const rejoined = await RawAgent.connect({ url: c.url, token: node.token, node: node.name });
    cleanup.push(() => rejoined.close());
    rejoined.heartbeat(running(service.id, deployed.body.id));
    await waitFor(async () => (await statusOn(a, service.id)).state === 'running', { timeoutMs: 3_000 });
    const again = await a.api('POST', `/v1/services/${service.id}/deployments`, {});
    expect(again.status).toBe(202);
  }, 60_000);
});
