import { PanelConnection, type ConnectionEvents } from '@tether/host-agent/dist/connection/panel-connection.js';
import { DisabledRouting, UnavailableWorkloads } from '@tether/host-agent/dist/null-controllers.js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLOSE_CODES, FRAME_ERROR_CODES, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION } from '@tether/protocol';
import { waitFor } from '@tether/testkit';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { V1Agent } from './helpers/v1-agent.js';
import { V1Panel } from './helpers/v1-panel.js';

// Panels and agents one release apart (docs/protocol.md, "Versions"). The
// previous release speaks protocol version 1 as frozen from commit a4fea2f
// (@tether/testkit, protocol-v1): a v1 agent on those schemas against this
// panel, and this release's real agent process against a v1 panel as strict
// as the first release's. Then versions this panel must refuse.

const PING_MS = 150;
const IDLE_MS = 1_000;
let panel: Panel;
const agents: V1Agent[] = [];
const processes: AgentProcess[] = [];

beforeAll(async () => {
  panel = await startPanel({
    env: {
      TETHER_PING_INTERVAL_MS: String(PING_MS),
      TETHER_HEARTBEAT_INTERVAL_MS: '100',
      TETHER_SESSION_IDLE_MS: String(IDLE_MS),
      TETHER_ACK_TIMEOUT_MS: '1000',
      TETHER_HELLO_TIMEOUT_MS: '1000',
      TETHER_ROUTING_DEBOUNCE_MS: '20',
      TETHER_PROTOCOL_VERSION_MAX: String(PROTOCOL_VERSION),
    },
  });
});
afterAll(async () => {
  for (const agent of agents) agent.close();
  await Promise.all(processes.map((p) => p.destroy()));
  await panel?.close();
});

const sessionRow = async (nodeId: string) => {
  const res = await panel.api('GET', '/v1/sessions');
  return (res.body.sessions as { nodeId: string; state: string; sessionId: string | null; heartbeats: number; pongs: number; routing: { desiredHash: string | null; appliedHash: string | null } }[]).find(
    (row) => row.nodeId === nodeId,
  )!;
};

describe('a v1 agent against this panel', () => {
  it('opens a session, heartbeats past the idle deadline, gets a deploy it ACKs and a routing map, and nothing v1 does not know', async () => {
    const node = await panel.createNode('v1-agent-1');
    const service = await panel.createService(node.id);
    const agent = new V1Agent({ url: panel.url, token: node.token, node: node.name, heartbeatMs: 100 });
    agents.push(agent);
    const welcome = await agent.waitFor((m) => m.type === 'welcome');
    expect(welcome).not.toHaveProperty('capabilities');
    await agent.waitFor((m) => m.type === 'workloads');
    await agent.waitFor((m) => m.type === 'routing.map');

    // Heartbeats and pongs keep it alive past the panel's read-idle deadline.
    await new Promise((r) => setTimeout(r, IDLE_MS + 500));
    const row = await sessionRow(node.id);
    expect(row).toMatchObject({ state: 'connected', sessionId: welcome.sessionId });
    expect(row.heartbeats).toBeGreaterThanOrEqual(5);
    expect(row.pongs).toBeGreaterThanOrEqual(1);
    expect(agent.closed).toBeNull();

    const res = await panel.api('POST', `/v1/services/${service.id}/deployments`, {});
    expect(res.status).toBe(202);
    // The v1 agent answers its result right after the ACK, so the 202 may already say running.
    expect(['delivered', 'running']).toContain(res.body.status);
    const deploy = await agent.waitFor((m) => m.type === 'deploy');
    expect(deploy.workload).toMatchObject({ serviceId: service.id, deploymentId: res.body.id });
    await waitFor(async () => (await panel.prisma.deployment.findUniqueOrThrow({ where: { id: res.body.id } })).status === 'running');

    const route = await panel.api('POST', '/v1/routes', { domain: 'v1-agent.example.test', serviceId: service.id });
    expect(route.status).toBe(201);
    const map = await agent.waitFor((m) => m.type === 'routing.map' && (m.routes as { domain: string }[]).some((r) => r.domain === 'v1-agent.example.test'));
    await waitFor(async () => (await sessionRow(node.id)).routing.appliedHash === map.hash);
    expect((await sessionRow(node.id)).routing.desiredHash).toBe(map.hash);

    expect(agent.violations).toEqual([]);
    expect(agent.closed).toBeNull();
  });
});

describe('this release\'s agent process against a v1 panel', () => {
  it('opens a session that stays valid under v1\'s schemas: hello, heartbeats, pongs, a deploy ACKed and answered, a map applied', async () => {
    const v1 = new V1Panel({ pingIntervalMs: PING_MS, heartbeatIntervalMs: 100 });
    const url = await v1.start();
    const agent = await startAgentProcess({ panelUrl: url, token: 'tth_node_v1_panel_token_0123456789', nodeName: 'v1-panel-agent', env: { TETHER_PROTOCOL_VERSION_MAX: String(PROTOCOL_VERSION) } });
    processes.push(agent);
    try {
      const hello = await v1.waitFor((m) => m.type === 'hello', 15_000);
      expect(hello.protocolVersion).toBe(1);
      const session = v1.live!;
      await v1.waitFor((m) => m.type === 'heartbeat' && (m.seq as number) >= 3);
      await v1.waitFor((m) => m.type === 'pong');

      const workload = { serviceId: 'svc_v1', serviceName: 'web', deploymentId: 'dep_v1', image: 'tether-test/busybox:1', env: {}, port: 8080, replicas: 1 };
      const deployId = v1.deploy(session, workload);
      await v1.waitFor((m) => m.type === 'ack' && m.ref === deployId);
      // No runtime on this agent: the deploy fails, and says so in a frame v1 takes.
      const result = await v1.waitFor((m) => m.type === 'deploy.result' && m.deploymentId === 'dep_v1');
      expect(result).toMatchObject({ status: 'failed', code: 'RUNTIME_UNAVAILABLE' });

      const mapId = v1.push(session, [{ domain: 'v1-panel.example.test', pathPrefix: null, serviceId: 'svc_v1', upstream: 'svc-svc-v1:8080' }], 2);
      await v1.waitFor((m) => m.type === 'ack' && m.ref === mapId);
      await v1.waitFor((m) => m.type === 'routing.applied' && m.ref === mapId);

      expect(v1.violations).toEqual([]);
      expect(v1.hellos).toEqual([1]);
      expect(v1.sessions.every((s) => !s.closed)).toBe(true);
    } finally {
      await v1.stop();
    }
  });
});

describe('a next-release agent against this panel', () => {
  it('says version 2, is refused with 4008, says 1 at once, and gets deploys on that session', async () => {
    const node = await panel.createNode('next-release-agent');
    const service = await panel.createService(node.id);
    // This release's connection code given the range a release with PROTOCOL_VERSION 2 would have.
    const connection = new PanelConnection({
      panelUrl: panel.url,
      token: node.token,
      nodeName: node.name,
      agentVersion: 'next',
      workloads: new UnavailableWorkloads(),
      routing: new DisabledRouting(),
      reconnect: { minMs: 2_000, maxMs: 4_000, healthySessionMs: 1_000, connectTimeoutMs: 1_000 },
      protocolVersions: { min: 1, max: 2 },
      logger: pino({ level: 'silent' }),
    });
    const closes: ConnectionEvents['closed'][0][] = [];
    connection.on('closed', (event) => closes.push(event));
    const ready = new Promise<ConnectionEvents['ready'][0]>((resolve) => connection.once('ready', resolve));
    const startedAt = Date.now();
    connection.start();
    try {
      const session = await ready;
      // At once: well inside the shortest backoff this agent has.
      expect(Date.now() - startedAt).toBeLessThan(1_000);
      expect(session.protocolVersion).toBe(1);
      expect(closes).toEqual([expect.objectContaining({ code: CLOSE_CODES.UNSUPPORTED_PROTOCOL_VERSION, sessionId: null, retryInMs: 0 })]);
      expect(await sessionRow(node.id)).toMatchObject({ state: 'connected', sessionId: session.sessionId });
      const res = await panel.api('POST', `/v1/services/${service.id}/deployments`, {});
      expect(res.status).toBe(202);
      // No runtime on this agent: the ACKed deploy ends failed with the agent's code.
      await waitFor(async () => (await panel.prisma.deployment.findUniqueOrThrow({ where: { id: res.body.id } })).status === 'failed');
    } finally {
      await connection.stop();
    }
  });
});

describe('versions this panel does not speak', () => {
  it.each([
    ['too old', MIN_PROTOCOL_VERSION - 1],
    ['too new', PROTOCOL_VERSION + 1],
  ])('%s (version %i): the coded error, then its close code, and the panel serves the next agent', async (_label, version) => {
    const node = await panel.createNode(`v${version}-agent`);
    const agent = new V1Agent({ url: panel.url, token: node.token, node: node.name, heartbeatMs: 100, protocolVersion: version });
    agents.push(agent);
    const error = await agent.waitFor((m) => m.type === 'error');
    expect(error).toMatchObject({ code: FRAME_ERROR_CODES.UNSUPPORTED_PROTOCOL_VERSION, ref: 'v1-1' });
    expect(error.message).toContain(`this end speaks ${MIN_PROTOCOL_VERSION}`);
    expect((await agent.waitClosed()).code).toBe(CLOSE_CODES.UNSUPPORTED_PROTOCOL_VERSION);
    expect(agent.received.map((m) => m.type)).toEqual(['error']);
    expect((await sessionRow(node.id)).state).toBe('never_connected');

    const again = new V1Agent({ url: panel.url, token: node.token, node: node.name, heartbeatMs: 100 });
    agents.push(again);
    await again.waitFor((m) => m.type === 'welcome');
    expect((await panel.api('GET', '/healthz')).status).toBe(200);
    again.close();
  });
});
