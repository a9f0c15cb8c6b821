import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, type PanelMessage } from '@tether/protocol';
import { sleep, waitFor } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// A service's drainSeconds (issue 22, drain) through the API, the capability rule that decides what an agent is
// sent, and the agent's deploy.drained recorded on the deployment through the fact outbox: once, only from the
// deployment's own node, only on a session that agreed on workload.drain. Real PostgreSQL, a scripted agent socket.

const DRAIN = [CAPABILITIES.WORKLOAD_DRAIN];
type Deploy = Extract<PanelMessage, { type: 'deploy' }>;
let panel: Panel;
let teamId: string;

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_ACK_TIMEOUT_MS: '2000', TETHER_SESSION_IDLE_MS: '5000', TETHER_PING_INTERVAL_MS: '1000' } });
  teamId = (await panel.api('POST', '/v1/teams', { name: `drain-${process.pid}` })).body.id;
});
afterAll(async () => panel?.close());

let n = 0;
const create = (node: string, body: Record<string, unknown> = {}) => panel.api('POST', '/v1/services', { teamId, name: `d${++n}`, image: 'tether-test/busybox:1', node, ...body });
const errorCode = (res: { status: number; body: { error?: { code: string } } }) => ({ status: res.status, code: res.body.error?.code });
const deployment = (id: string) => panel.prisma.deployment.findUniqueOrThrow({ where: { id } });

/** A node with a live session of a scripted agent announcing `capabilities`. */
async function connected(name: string, capabilities?: string[]) {
  const node = await panel.createNode(`${name}-${process.pid}`);
  const agent = await RawAgent.connect({ url: panel.url, token: node.token, ...(capabilities ? { capabilities } : {}) });
  await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 5_000, message: 'session' });
  return { node, agent };
}

/** Deploys the service; returns the deployment and the deploy frame the agent received. */
async function deploy(agent: RawAgent, serviceId: string) {
  const res = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
  expect(res.status).toBe(202);
  const frame = await agent.waitFor<Deploy>((m) => m.type === 'deploy' && m.workload.deploymentId === res.body.id);
  return { id: res.body.id as string, frame };
}

describe('drainSeconds: the edge', () => {
  let node: string;
  beforeAll(async () => {
    node = (await panel.createNode(`drain-edge-${process.pid}`)).name;
  });

  it('defaults to 30, takes 0 and 3600, and a PATCH changes it', async () => {
    expect((await create(node)).body.drainSeconds).toBe(30);
    expect((await create(node, { drainSeconds: 0 })).body.drainSeconds).toBe(0);
    const max = await create(node, { drainSeconds: 3600 });
    expect(max.body.drainSeconds).toBe(3600);
    const patched = await panel.api('PATCH', `/v1/services/${max.body.id}`, { drainSeconds: 8 });
    expect(patched.status).toBe(200);
    expect(patched.body.drainSeconds).toBe(8);
    expect((await panel.api('GET', `/v1/services/${max.body.id}`)).body.drainSeconds).toBe(8);
  });

  it.each([
    ['-1', -1],
    ['3601', 3601],
    ['a fraction', 1.5],
    ['a string', '30'],
    ['null', null],
  ])('%s: 400 VALIDATION_FAILED on create and PATCH, nothing stored', async (_what, drainSeconds) => {
    const before = await panel.prisma.service.count();
    expect(errorCode(await create(node, { drainSeconds }))).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
    expect(await panel.prisma.service.count()).toBe(before);
    const svc = await create(node, { drainSeconds: 12 });
    expect(errorCode(await panel.api('PATCH', `/v1/services/${svc.body.id}`, { drainSeconds }))).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
    expect((await panel.prisma.service.findUniqueOrThrow({ where: { id: svc.body.id } })).drainSeconds).toBe(12);
  });
});

describe('drainSeconds: capabilities', () => {
  it('an agent without workload.drain: the default is left out and the deploy runs; any other value fails AGENT_LACKS_CAPABILITY, never sent', async () => {
    const { node, agent } = await connected('drain-old');
    const plain = await create(node.name);
    const { id, frame } = await deploy(agent, plain.body.id);
    expect(frame.workload).not.toHaveProperty('drainSeconds');
    expect(await deployment(id)).toMatchObject({ status: 'delivered', reportsDrain: false });
    agent.send({ type: 'deploy.result', id: 'r1', deploymentId: id, status: 'running', reason: 'started', code: null });
    await waitFor(async () => (await deployment(id)).status === 'running');

    const sent = agent.received.filter((m) => m.type === 'deploy').length;
    const long = await create(node.name, { drainSeconds: 31 });
    const res = await panel.api('POST', `/v1/services/${long.body.id}/deployments`, {});
    expect(errorCode(res)).toEqual({ status: 409, code: 'AGENT_LACKS_CAPABILITY' });
    expect(res.body.error.message).toContain('workload.drain');
    const [row] = await panel.prisma.deployment.findMany({ where: { serviceId: long.body.id } });
    expect(row).toMatchObject({ status: 'failed', reason: expect.stringMatching(/^AGENT_LACKS_CAPABILITY: .*workload\.drain/) });
    // Zero is not the default either: an older agent would drain for its own time instead of stopping at once.
    const zero = await create(node.name, { drainSeconds: 0 });
    expect(errorCode(await panel.api('POST', `/v1/services/${zero.body.id}/deployments`, {}))).toEqual({ status: 409, code: 'AGENT_LACKS_CAPABILITY' });
    await sleep(100);
    expect(agent.received.filter((m) => m.type === 'deploy').length).toBe(sent);
    agent.close();

    // Rejoining, the older agent's set carries the running default deployment (without the field), not dropped.
    const again = await RawAgent.connect({ url: panel.url, token: node.token });
    const set = await again.waitFor<Extract<PanelMessage, { type: 'workloads' }>>((m) => m.type === 'workloads');
    expect(set.workloads.map((w) => w.deploymentId)).toEqual([id]);
    expect(set.workloads[0]).not.toHaveProperty('drainSeconds');
    again.close();
  });

  it('an agent with workload.drain is sent drainSeconds, the default too, in deploy and in the workloads set; the row says it reports the drain', async () => {
    const { node, agent } = await connected('drain-new', DRAIN);
    const svc = await create(node.name, { drainSeconds: 8 });
    const { id, frame } = await deploy(agent, svc.body.id);
    expect(frame.workload.drainSeconds).toBe(8);
    const row = await panel.api('GET', `/v1/deployments/${id}`);
    expect(row.body).toMatchObject({ reportsDrain: true, connectionsOpenAtSwitch: null, connectionsCut: null, drainEndedAt: null, spec: { drainSeconds: 8 } });
    const plain = await create(node.name);
    expect((await deploy(agent, plain.body.id)).frame.workload.drainSeconds).toBe(30);
    agent.close();
    const again = await RawAgent.connect({ url: panel.url, token: node.token, capabilities: DRAIN });
    const set = await again.waitFor<Extract<PanelMessage, { type: 'workloads' }>>((m) => m.type === 'workloads');
    expect(new Map(set.workloads.map((w) => [w.serviceId, w.drainSeconds]))).toEqual(new Map([[svc.body.id, 8], [plain.body.id, 30]]));
    again.close();
  });

  it('a rollback keeps the current drainSeconds (a rollout setting, like replicas)', async () => {
    const { node, agent } = await connected('drain-rollback', DRAIN);
    const svc = await create(node.name, { drainSeconds: 20 });
    const first = await deploy(agent, svc.body.id);
    agent.send({ type: 'deploy.result', id: 'r1', deploymentId: first.id, status: 'running', reason: 'started', code: null });
    await waitFor(async () => (await deployment(first.id)).status === 'running');
    await panel.api('PATCH', `/v1/services/${svc.body.id}`, { image: 'tether-test/busybox:2', drainSeconds: 5 });
    const second = await deploy(agent, svc.body.id);
    agent.send({ type: 'deploy.result', id: 'r2', deploymentId: second.id, status: 'running', reason: 'started', code: null });
    await waitFor(async () => (await deployment(second.id)).status === 'running');
    const back = await panel.api('POST', `/v1/services/${svc.body.id}/rollback`, {});
    expect(back.status).toBe(202);
    expect(back.body.spec).toMatchObject({ image: 'tether-test/busybox:1', drainSeconds: 5 });
    const frame = await agent.waitFor<Deploy>((m) => m.type === 'deploy' && m.workload.deploymentId === back.body.id);
    expect(frame.workload.drainSeconds).toBe(5);
    expect((await panel.api('GET', `/v1/services/${svc.body.id}`)).body).toMatchObject({ image: 'tether-test/busybox:1', drainSeconds: 5 });
    agent.close();
  });
});

describe('deploy.drained', () => {
  const drained = (deploymentId: string, open: number | null, cut: number | null, at: string, id = `x${Math.random()}`) =>
    ({ type: 'deploy.drained', id, deploymentId, connectionsOpenAtSwitch: open, connectionsCut: cut, drainEndedAt: at }) as const;

  it('the first report is recorded and read back; repeats change nothing; the cut is counted once in /metrics', async () => {
    const { node, agent } = await connected('drained-once', DRAIN);
    const svc = await create(node.name);
    const { id } = await deploy(agent, svc.body.id);
    agent.send({ type: 'deploy.result', id: 'r1', deploymentId: id, status: 'running', reason: 'started', code: null });
    agent.send(drained(id, 3, 1, '2026-12-02T06:00:30.000Z'));
    await waitFor(async () => (await deployment(id)).drainEndedAt !== null, { message: 'drain recorded' });
    // Repeats (a resend after a reconnect, a second report with other numbers) are ignored.
    agent.send(drained(id, 9, 9, '2026-12-02T06:09:00.000Z'));
    agent.close();
    const again = await RawAgent.connect({ url: panel.url, token: node.token, capabilities: DRAIN });
    again.send(drained(id, 7, 7, '2026-12-02T06:07:00.000Z'));
    await panel.settled();
    await sleep(200);
    await panel.settled();
    const row = await panel.api('GET', `/v1/deployments/${id}`);
    expect(row.body).toMatchObject({ status: 'running', reportsDrain: true, connectionsOpenAtSwitch: 3, connectionsCut: 1, drainEndedAt: '2026-12-02T06:00:30.000Z' });
    const metrics = await (await fetch(`${panel.url}/metrics`)).text();
    expect(metrics).toContain(`tether_node_drain_connections_cut_total{node="${node.name}"} 1\n`);
    expect(metrics).toContain(`tether_node_drains_total{node="${node.name}",counted="yes"} 1\n`);
    again.close();
  });

  it('counts the proxy cannot give stay null, with the drain end recorded', async () => {
    const { node, agent } = await connected('drained-uncounted', DRAIN);
    const { id } = await deploy(agent, (await create(node.name)).body.id);
    agent.send({ type: 'deploy.result', id: 'r1', deploymentId: id, status: 'running', reason: 'started', code: null });
    agent.send(drained(id, null, null, '2026-12-02T06:00:30.000Z'));
    await waitFor(async () => (await deployment(id)).drainEndedAt !== null);
    expect(await deployment(id)).toMatchObject({ connectionsOpenAtSwitch: null, connectionsCut: null });
    const metrics = await (await fetch(`${panel.url}/metrics`)).text();
    expect(metrics).toContain(`tether_node_drains_total{node="${node.name}",counted="no"} 1\n`);
    agent.close();
  });

  it("another node's report of a deployment is ignored", async () => {
    const owner = await connected('drained-owner', DRAIN);
    const other = await connected('drained-other', DRAIN);
    const { id } = await deploy(owner.agent, (await create(owner.node.name)).body.id);
    owner.agent.send({ type: 'deploy.result', id: 'r1', deploymentId: id, status: 'running', reason: 'started', code: null });
    await waitFor(async () => (await deployment(id)).status === 'running');
    other.agent.send(drained(id, 5, 5, '2026-12-02T06:00:30.000Z'));
    await sleep(200);
    await panel.settled();
    expect(await deployment(id)).toMatchObject({ connectionsOpenAtSwitch: null, connectionsCut: null, drainEndedAt: null });
    // The owner's own report still counts afterwards.
    owner.agent.send(drained(id, 2, 0, '2026-12-02T06:00:31.000Z'));
    await waitFor(async () => (await deployment(id)).drainEndedAt !== null);
    expect(await deployment(id)).toMatchObject({ connectionsOpenAtSwitch: 2, connectionsCut: 0 });
    owner.agent.close();
    other.agent.close();
  });

  it('refused without the capability (UNEXPECTED_MESSAGE) and when invalid (a negative or fractional count, no time): nothing recorded', async () => {
    const old = await connected('drained-nocap');
    const { id } = await deploy(old.agent, (await create(old.node.name)).body.id);
    old.agent.send(drained(id, 1, 1, '2026-12-02T06:00:30.000Z', 'nocap'));
    const refused = await old.agent.waitFor<Extract<PanelMessage, { type: 'error' }>>((m) => m.type === 'error' && m.ref === 'nocap');
    expect(refused.code).toBe('UNEXPECTED_MESSAGE');
    old.agent.close();

    const { agent } = await connected('drained-invalid', DRAIN);
    const invalid: [string, Record<string, unknown>][] = [
      ['neg', { ...drained(id, -1, 0, '2026-12-02T06:00:30.000Z') }],
      ['frac', { ...drained(id, 1.5, 0, '2026-12-02T06:00:30.000Z') }],
      ['notime', { type: 'deploy.drained', deploymentId: id, connectionsOpenAtSwitch: 1, connectionsCut: 0 }],
    ];
    for (const [ref, frame] of invalid) agent.sendRaw(JSON.stringify({ ...frame, id: ref }));
    for (const [ref] of invalid) {
      const error = await agent.waitFor<Extract<PanelMessage, { type: 'error' }>>((m) => m.type === 'error' && m.ref === ref);
      expect(['INVALID_FIELD', 'MISSING_FIELD']).toContain(error.code);
    }
    await panel.settled();
    expect(await deployment(id)).toMatchObject({ connectionsOpenAtSwitch: null, connectionsCut: null, drainEndedAt: null });
    expect(agent.closed).toBeNull();
    agent.close();
  });

  it('a drainEndedAt that is no time (the protocol bounds only its text) is recorded as the time the panel received it', async () => {
    const { node, agent } = await connected('drained-badtime', DRAIN);
    const { id } = await deploy(agent, (await create(node.name)).body.id);
    const before = Date.now();
    agent.send(drained(id, 1, 0, 'yesterday'));
    await waitFor(async () => (await deployment(id)).drainEndedAt !== null);
    const at = (await deployment(id)).drainEndedAt!.getTime();
    expect(at).toBeGreaterThanOrEqual(before - 5);
    expect(at).toBeLessThanOrEqual(Date.now());
    agent.close();
  });
});
