import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CLOSE_CODES } from '@tether/protocol';
import { blackhole, ensureIptables, waitFor, type ManagedProcess } from '@tether/testkit';
import type { Teardown } from '../src/sessions/registry.js';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// A real agent process against a real panel, and real faults: a half-open TCP
// connection made with iptables (no FIN, no RST), a frozen agent (SIGSTOP),
// a panel restart and a decommission.

const IDLE_MS = 600;
const AGENT_IDLE_MS = 1_500;
let panel: Panel;
const agents: AgentProcess[] = [];

beforeAll(async () => {
  panel = await startPanel({
    env: {
      TETHER_SESSION_IDLE_MS: String(IDLE_MS),
      TETHER_PING_INTERVAL_MS: '200',
      TETHER_HEARTBEAT_INTERVAL_MS: '200',
      TETHER_AGENT_IDLE_MS: String(AGENT_IDLE_MS),
    },
  });
});
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.destroy()));
});
afterAll(async () => {
  await panel?.close();
});

async function startAgent(token: string, nodeName: string): Promise<ManagedProcess> {
  const agent = await startAgentProcess({ panelUrl: panel.url, token, nodeName });
  agents.push(agent);
  return agent.process;
}

function nextTeardown(nodeId: string): Promise<{ teardown: Teardown; lastFrameAt: number }> {
  return new Promise((resolve) => {
    const listener = (session: { nodeId: string; lastFrameAt: number }, teardown: Teardown) => {
      if (session.nodeId !== nodeId) return;
      panel.app.agentSide.registry.off('closed', listener);
      resolve({ teardown, lastFrameAt: session.lastFrameAt });
    };
    panel.app.agentSide.registry.on('closed', listener);
  });
}

const iptables = await ensureIptables();

describe.skipIf(!iptables.available)('half-open connection (iptables DROP both directions)', () => {
  it('panel tears down within its deadline, the agent gives up within its own, and rejoins once the path is back', async () => {
    const node = await panel.createNode('halfopen-1');
    const agent = await startAgent(node.token, node.name);
    const first = await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000 });
    await waitFor(() => first.heartbeats >= 2);

    const teardown = nextTeardown(node.id);
    const hole = blackhole(panel.port);
    const cutAt = Date.now();
    try {
      const { teardown: t, lastFrameAt } = await teardown;
      expect(t.code).toBe(CLOSE_CODES.IDLE_TIMEOUT);
      expect(t.at - lastFrameAt).toBeGreaterThanOrEqual(IDLE_MS);
      expect(t.at - lastFrameAt).toBeLessThanOrEqual(IDLE_MS + 1_000);
      expect(panel.app.agentSide.registry.get(node.id)).toBeUndefined();

      const line = await agent.waitForOutput(/\{[^\n]*read-idle deadline[^\n]*\}/, AGENT_IDLE_MS + 3_000);
      const gaveUp = JSON.parse(line[0]) as { time: number; silentForMs: number };
      // Bounded both ways from the agent's own last frame, and not long after the cut.
      expect(gaveUp.silentForMs).toBeGreaterThanOrEqual(AGENT_IDLE_MS);
      expect(gaveUp.silentForMs).toBeLessThanOrEqual(AGENT_IDLE_MS + 1_000);
      expect(gaveUp.time - cutAt).toBeLessThanOrEqual(AGENT_IDLE_MS + 1_000);

      // While the path is down it cannot rejoin.
      await new Promise((r) => setTimeout(r, 800));
      expect(panel.app.agentSide.registry.get(node.id)).toBeUndefined();
    } finally {
      hole.release();
    }
    const rejoined = await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 6_000 });
    expect(rejoined.id).not.toBe(first.id);
    expect(agent.child.exitCode).toBeNull();
  });
});

describe('frozen agent (SIGSTOP)', () => {
  it('panel tears down within its deadline; after SIGCONT the agent notices and rejoins by itself', async () => {
    const node = await panel.createNode('frozen-1');
    const agent = await startAgent(node.token, node.name);
    const first = await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000 });
    await waitFor(() => first.heartbeats >= 2);
    const teardown = nextTeardown(node.id);
    process.kill(agent.pid, 'SIGSTOP');
    try {
      const { teardown: t, lastFrameAt } = await teardown;
      expect(t.code).toBe(CLOSE_CODES.IDLE_TIMEOUT);
      expect(t.at - lastFrameAt).toBeGreaterThanOrEqual(IDLE_MS);
      expect(t.at - lastFrameAt).toBeLessThanOrEqual(IDLE_MS + 1_000);
      const status = await panel.api('GET', '/v1/sessions');
      expect(status.body.sessions.find((r: { nodeId: string }) => r.nodeId === node.id).state).toBe('unreachable');
    } finally {
      process.kill(agent.pid, 'SIGCONT');
    }
    const rejoined = await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 6_000 });
    expect(rejoined.id).not.toBe(first.id);
  });
});

describe('panel restart', () => {
  it('agents come back by themselves', async () => {
    const node = await panel.createNode('patient-1');
    await startAgent(node.token, node.name);
    const first = await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000 });
    await panel.stopApp();
    await new Promise((r) => setTimeout(r, 700));
    await panel.restartApp();
    const rejoined = await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 6_000 });
    expect(rejoined.id).not.toBe(first.id);
    // Session facts are written by the outbox, just after the registry has the session.
    await panel.settled();
    const events = await panel.prisma.sessionEvent.findMany({ where: { nodeId: node.id }, orderBy: { id: 'asc' } });
    expect(events.map((e) => [e.kind, e.closeCode])).toEqual([
      ['opened', null],
      ['closed', CLOSE_CODES.SERVICE_RESTART],
      ['opened', null],
    ]);
  });

  it('an agent deep in a slow backoff comes back within the hinted window of the panel listening, not later', async () => {
    const node = await panel.createNode('hinted-1');
    // Its own backoff alone would wait up to 4 s, then 8 s: only the hint brings it back within 1 s.
    const agent = await startAgentProcess({ panelUrl: panel.url, token: node.token, nodeName: node.name, env: { TETHER_RECONNECT_MIN_MS: '4000', TETHER_RECONNECT_MAX_MS: '30000' } });
    agents.push(agent);
    const first = await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000 });
    await panel.stopApp();
    const line = await agent.process.waitForOutput(/\{[^\n]*"code":1012[^\n]*disconnected from panel[^\n]*\}/, 5_000);
    // One panel session: the window is the 1 s floor.
    expect(JSON.parse(line[0])).toMatchObject({ reason: 'panel shutting down; retry-window-ms=1000', hinted: true });
    await new Promise((r) => setTimeout(r, 2_500));
    const restartAt = Date.now();
    await panel.restartApp();
    const listening = Date.now();
    const rejoined = await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 6_000, intervalMs: 10 });
    const backAt = rejoined.openedAt;
    expect(rejoined.id).not.toBe(first.id);
    expect(backAt).toBeGreaterThanOrEqual(restartAt);
    // Within the window (attempts every 0.5–1 s while the panel was down) plus a connect and hello on this machine.
    expect(backAt - listening).toBeLessThanOrEqual(1_000 + 500);
    // Every retry while the panel was down came from the hinted schedule: refused about once a window, never doubled.
    const retries = [...agent.process.output().matchAll(/\{[^\n]*disconnected from panel[^\n]*\}/g)].map((m) => JSON.parse(m[0]) as { retryInMs: number; hinted: boolean });
    const afterStop = retries.slice(retries.findIndex((r) => r.hinted));
    expect(afterStop.length).toBeGreaterThanOrEqual(3);
    for (const r of afterStop) {
      expect(r.hinted).toBe(true);
      expect(r.retryInMs).toBeLessThanOrEqual(1_000);
    }
    for (const r of afterStop.slice(1)) expect(r.retryInMs).toBeGreaterThanOrEqual(500);
  });
});

describe('decommission', () => {
  it('closes the session, refuses the agent from then on, and its services leave status', async () => {
    const node = await panel.createNode('retiring-1');
    const service = await panel.createService(node.id, 'retiring-svc');
    const agent = await startAgent(node.token, node.name);
    await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000 });
    let status = await panel.api('GET', '/v1/status');
    expect(status.body.services.map((s: { serviceId: string }) => s.serviceId)).toContain(service.id);

    const teardown = nextTeardown(node.id);
    const res = await panel.api('DELETE', `/v1/nodes/${node.id}`);
    expect(res.status).toBeLessThan(300);
    expect((await teardown).teardown.code).toBe(CLOSE_CODES.DECOMMISSIONED);
    await agent.waitForOutput(/panel refused this node token/, 5_000);
    expect(panel.app.agentSide.registry.get(node.id)).toBeUndefined();

    status = await panel.api('GET', '/v1/status');
    expect(status.body.services.map((s: { serviceId: string }) => s.serviceId)).not.toContain(service.id);
    const sessions = await panel.api('GET', '/v1/sessions');
    expect(sessions.body.sessions.find((r: { nodeId: string }) => r.nodeId === node.id).state).toBe('decommissioned');
  });
});
