import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLOSE_CODES } from '@tether/protocol';
import { waitFor } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// Deploy dispatch over live sessions: ACKed → 202 delivered; no ACK → the
// session is killed at the ACK timeout and the next deploy fails fast;
// no session → 503 at once; results move the row to running or failed.

const ACK_MS = 400;
let panel: Panel;

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_ACK_TIMEOUT_MS: String(ACK_MS), TETHER_SESSION_IDLE_MS: '5000', TETHER_PING_INTERVAL_MS: '1000' } });
});
afterAll(async () => panel?.close());

const deploy = (serviceId: string) => panel.api('POST', `/v1/services/${serviceId}/deployments`, {});

describe('dispatch', () => {
  it('an ACKed deploy answers 202 delivered; deploy.result moves it to running, and a newer one supersedes it', async () => {
    const node = await panel.createNode('acker-1');
    const service = await panel.createService(node.id);
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 100 });
    const res = await deploy(service.id);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ status: 'delivered', serviceId: service.id });
    const sent = await agent.waitFor<Extract<typeof agent.received[number], { type: 'deploy' }>>((m) => m.type === 'deploy');
    expect(sent.workload).toMatchObject({ serviceId: service.id, deploymentId: res.body.id, image: 'tether-test/busybox:1', port: 8080, replicas: 1 });

    agent.send({ type: 'deploy.result', id: 'r1', deploymentId: res.body.id, status: 'running', reason: 'started', code: null });
    await waitFor(async () => (await panel.prisma.deployment.findUniqueOrThrow({ where: { id: res.body.id } })).status === 'running');

    const second = await deploy(service.id);
    agent.send({ type: 'deploy.result', id: 'r2', deploymentId: second.body.id, status: 'failed', reason: 'exited with code 3', code: 'CONTAINER_EXITED' });
    await waitFor(async () => (await panel.prisma.deployment.findUniqueOrThrow({ where: { id: second.body.id } })).status === 'failed');
    const failed = await panel.api('GET', `/v1/deployments/${second.body.id}`);
    expect(failed.body.reason).toBe('CONTAINER_EXITED: exited with code 3');
    expect((await panel.prisma.deployment.findUniqueOrThrow({ where: { id: res.body.id } })).status).toBe('running');

    const third = await deploy(service.id);
    agent.send({ type: 'deploy.result', id: 'r3', deploymentId: third.body.id, status: 'running', reason: 'started', code: null });
    await waitFor(async () => (await panel.prisma.deployment.findUniqueOrThrow({ where: { id: res.body.id } })).status === 'superseded');
    agent.close();
  });

  it('a heartbeat showing a delivered deployment running settles it when its session (and maybe its result) was lost, not before', async () => {
    const node = await panel.createNode('observer-1');
    const service = await panel.createService(node.id);
    const first = await RawAgent.connect({ url: panel.url, token: node.token });
    const res = await deploy(service.id);
    expect(res.status).toBe(202);
    const running = (health: 'none' | 'starting') => [
      { containerId: 'c1', serviceId: service.id, deploymentId: res.body.id, name: 'x', state: 'running' as const, exitCode: null, health, restartCount: 0, since: new Date().toISOString() },
    ];
    const status = async () => (await panel.prisma.deployment.findUniqueOrThrow({ where: { id: res.body.id } })).status;
    // On the session it was delivered on, a running container is not the agent's verdict (it may still fail its
    // readiness checks, and the deploy.result will come on that session).
    first.heartbeat(running('none'));
    await new Promise((r) => setTimeout(r, 300));
    expect(await status()).toBe('delivered');
    first.close();
    await waitFor(() => !panel.app.agentSide.registry.get(node.id));

    const second = await RawAgent.connect({ url: panel.url, token: node.token });
    await second.waitFor((m) => m.type === 'workloads');
    // Still starting its health check: not yet.
    second.heartbeat(running('starting'));
    await new Promise((r) => setTimeout(r, 300));
    expect(await status()).toBe('delivered');
    second.heartbeat(running('none'));
    await waitFor(async () => (await status()) === 'running');
    second.close();
  });

  it('no ACK: the session is killed at the ACK timeout (bounded both ways), the next deploy fails in under 100 ms, and deploys work again after rejoin', async () => {
    const node = await panel.createNode('deaf-1');
    const service = await panel.createService(node.id);
    const deaf = await RawAgent.connect({ url: panel.url, token: node.token, ack: ['workloads', 'routing.map'], heartbeatMs: 100 });
    await deaf.waitFor((m) => m.type === 'workloads');

    const slow = await deploy(service.id);
    expect(slow.status).toBe(504);
    expect(slow.body.error.code).toBe('ACK_TIMEOUT');
    expect(slow.ms).toBeGreaterThanOrEqual(ACK_MS);
    expect(slow.ms).toBeLessThanOrEqual(ACK_MS + 1_000);
    expect((await deaf.waitClosed()).code).toBe(CLOSE_CODES.ACK_TIMEOUT);
    const row = await panel.prisma.deployment.findFirstOrThrow({ where: { serviceId: service.id }, orderBy: { createdAt: 'desc' } });
    expect(row.status).toBe('ack_timeout');
    expect(row.reason).toMatch(/did not acknowledge the deploy within 400 ms/);
    expect(row.finishedAt).not.toBeNull();

    const fast = await deploy(service.id);
    expect(fast.status).toBe(503);
    expect(fast.body.error.code).toBe('NODE_UNREACHABLE');
    expect(fast.body.error.message).toMatch(/node deaf-1 is unreachable since .*deploys fail until it rejoins/);
    expect(fast.ms).toBeLessThan(100);
    const unreachable = await panel.prisma.deployment.findFirstOrThrow({ where: { serviceId: service.id }, orderBy: { createdAt: 'desc' } });
    expect(unreachable.status).toBe('unreachable');

    const sessions = await panel.api('GET', '/v1/sessions');
    expect(sessions.body.sessions.find((r: { nodeId: string }) => r.nodeId === node.id)).toMatchObject({
      state: 'unreachable',
      lastTeardown: { code: CLOSE_CODES.ACK_TIMEOUT },
    });

    const healthy = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 100 });
    const again = await deploy(service.id);
    expect(again.status).toBe(202);
    expect(again.body.status).toBe('delivered');
    healthy.close();
  });

  it('no session at all: 503 NODE_UNREACHABLE at once, and the deployment row ends unreachable with the reason', async () => {
    const node = await panel.createNode('never-1');
    const service = await panel.createService(node.id);
    const res = await deploy(service.id);
    expect(res.status).toBe(503);
    expect(res.ms).toBeLessThan(100);
    expect(res.body.error.message).toBe('node never-1 is unreachable; deploys fail until it rejoins');
    const row = await panel.prisma.deployment.findFirstOrThrow({ where: { serviceId: service.id } });
    expect(row).toMatchObject({ status: 'unreachable', reason: 'node never-1 is unreachable; deploys fail until it rejoins' });
  });

  it('on (re)join the node is sent what it should run', async () => {
    const node = await panel.createNode('rejoin-1');
    const service = await panel.createService(node.id);
    const first = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 100 });
    const res = await deploy(service.id);
    expect(res.status).toBe(202);
    first.close();
    await waitFor(() => !panel.app.agentSide.registry.get(node.id));
    const second = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 100 });
    const workloads = await second.waitFor<Extract<typeof second.received[number], { type: 'workloads' }>>((m) => m.type === 'workloads');
    expect(workloads.workloads).toEqual([expect.objectContaining({ serviceId: service.id, deploymentId: res.body.id })]);
    second.close();
  });
});
