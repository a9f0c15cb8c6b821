import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// Free text from an agent (a reason can carry a crashed container's last
// output, so any byte) is kept but sanitised before any database row: a NUL
// must neither lose the row (PostgreSQL refuses 0x00 in text) nor be stored.

let panel: Panel;

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_SESSION_IDLE_MS: '5000', TETHER_PING_INTERVAL_MS: '1000', TETHER_ROUTING_DEBOUNCE_MS: '10' } });
});
afterAll(async () => panel?.close());

const NASTY = 'exited with code 1; last output: boom\u0000\u001b[31mred\u001b[0m\r\nnext line\ttab';
const SANITISED = 'exited with code 1; last output: boom\\u0000\\u001b[31mred\\u001b[0m\\u000d\nnext line\ttab';

describe('agent free text with NUL and control characters', () => {
  it('deploy.result: the deployment ends failed with the sanitised reason', async () => {
    const node = await panel.createNode('nul-result');
    const service = await panel.createService(node.id);
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 100 });
    const res = await panel.api('POST', `/v1/services/${service.id}/deployments`, {});
    expect(res.status).toBe(202);
    agent.send({ type: 'deploy.result', id: 'r1', deploymentId: res.body.id, status: 'failed', reason: NASTY, code: 'CONTAINER_EXITED' });
    const row = await waitFor(async () => {
      const d = await panel.prisma.deployment.findUniqueOrThrow({ where: { id: res.body.id } });
      return d.status === 'failed' ? d : undefined;
    });
    expect(row.reason).toBe(`CONTAINER_EXITED: ${SANITISED}`);
    expect(row.reason).not.toContain('\u0000');
    agent.close();
  });

  it('routing.applied: the reload is recorded with the sanitised reason', async () => {
    const node = await panel.createNode('nul-reload');
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 100 });
    const map = await agent.waitFor<Extract<(typeof agent.received)[number], { type: 'routing.map' }>>((m) => m.type === 'routing.map');
    agent.send({
      type: 'routing.applied',
      id: 'a1',
      ref: map.id,
      hash: map.hash,
      changed: true,
      reloaded: true,
      error: null,
      routing: { appliedHash: map.hash, reloadsTotal: 1, reloadsToday: 1, lastReloadAt: new Date().toISOString(), lastReloadReason: NASTY },
    });
    const reload = await waitFor(async () => (await panel.prisma.reloadEvent.findMany({ where: { nodeId: node.id } }))[0]);
    expect(reload.reason).toBe(SANITISED);
    expect(reload.hashAfter).toBe(map.hash);
    agent.close();
  });

  it('a close reason with a NUL: the session_events row is written, sanitised', async () => {
    const node = await panel.createNode('nul-close');
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 100 });
    await waitFor(() => panel.app.agentSide.registry.get(node.id));
    agent.socket.close(4999, 'bye\u0000now');
    const closed = await waitFor(async () => (await panel.prisma.sessionEvent.findMany({ where: { nodeId: node.id, kind: 'closed' } }))[0]);
    expect(closed.reason).toBe('closed by agent (4999: bye\\u0000now)');
  });
});
