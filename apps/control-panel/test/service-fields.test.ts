import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, type PanelMessage } from '@tether/protocol';
import { waitFor } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// A service's command, args, resources and volumes through the API: validated at the edge with coded
// errors, stored, carried by the deployment's spec, and sent only to an agent that announced the
// capability each needs (otherwise the deployment ends failed with AGENT_LACKS_CAPABILITY, never sent).

const ALL = [CAPABILITIES.WORKLOAD_COMMAND, CAPABILITIES.WORKLOAD_RESOURCES, CAPABILITIES.WORKLOAD_VOLUMES];
let panel: Panel;
let teamId: string;

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_ACK_TIMEOUT_MS: '2000', TETHER_SESSION_IDLE_MS: '5000', TETHER_PING_INTERVAL_MS: '1000' } });
  const team = await panel.api('POST', '/v1/teams', { name: `fields-${process.pid}` });
  teamId = team.body.id;
});
afterAll(async () => panel?.close());

let n = 0;
const create = (node: string, body: Record<string, unknown>) => panel.api('POST', '/v1/services', { teamId, name: `s${++n}`, image: 'tether-test/busybox:1', node, ...body });
const errorCode = (res: { status: number; body: { error?: { code: string } } }) => ({ status: res.status, code: res.body.error?.code });
const data = (mountPath = '/data', readOnly = false) => ({ name: 'data', mountPath, readOnly });

describe('service command, resources and volumes: the edge', () => {
  let node: string;
  beforeAll(async () => {
    node = (await panel.createNode(`edge-${process.pid}`)).name;
  });

  it('stores and answers them; a service without them answers null/[]', async () => {
    const full = await create(node, { command: ['worker'], args: ['--queue', 'mail'], resources: { cpus: 0.5, memoryMiB: 128 }, volumes: [data(), { name: 'assets', mountPath: '/srv/assets/', readOnly: true }] });
    expect(full.status).toBe(201);
    expect(full.body).toMatchObject({
      command: ['worker'],
      args: ['--queue', 'mail'],
      resources: { cpus: 0.5, memoryMiB: 128 },
      // readOnly defaults to false; a trailing slash is normalised away.
      volumes: [data(), { name: 'assets', mountPath: '/srv/assets', readOnly: true }],
    });
    const plain = await create(node, {});
    expect(plain.body).toMatchObject({ command: null, args: null, resources: null, volumes: [] });
    // PATCH null clears; {} resources means none.
    const cleared = await panel.api('PATCH', `/v1/services/${full.body.id}`, { command: null, resources: {} });
    expect(cleared.body).toMatchObject({ command: null, args: ['--queue', 'mail'], resources: null });
  });

  it.each([
    ['a host path as the name', [{ name: '/var/lib/data', mountPath: '/data' }]],
    ['the Docker socket', [{ name: '/var/run/docker.sock', mountPath: '/var/run/docker.sock' }]],
    ["another service's Docker volume name", [{ name: 'tether-abc_data', mountPath: '/data' }]],
    ['an upper-case name', [{ name: 'Data', mountPath: '/data' }]],
    ['a relative mount path', [{ name: 'data', mountPath: 'data' }]],
    ['a mount path with ..', [{ name: 'data', mountPath: '/srv/../etc' }]],
    ['a mount path ending in ..', [{ name: 'data', mountPath: '/srv/..' }]],
    ['the root as mount path', [{ name: 'data', mountPath: '/' }]],
    ['a control character in the path', [{ name: 'data', mountPath: '/da\nta' }]],
    ['a name used twice', [data('/a'), data('/b')]],
    ['one path used twice', [{ name: 'a', mountPath: '/x' }, { name: 'b', mountPath: '/x/' }]],
    ['eleven volumes', Array.from({ length: 11 }, (_, i) => ({ name: `v${i}`, mountPath: `/v${i}`, readOnly: true }))],
  ])('%s: 400 INVALID_VOLUME, nothing stored', async (_what, volumes) => {
    const before = await panel.prisma.service.count();
    expect(errorCode(await create(node, { volumes }))).toEqual({ status: 400, code: 'INVALID_VOLUME' });
    expect(await panel.prisma.service.count()).toBe(before);
  });

  it.each([
    ['an empty command', { command: [] }],
    ['a NUL in an argument', { args: ['a\u0000b'] }],
    ['a memory limit under 6 MiB', { resources: { memoryMiB: 4 } }],
    ['no CPU at all', { resources: { cpus: 0 } }],
    ['an unknown resource', { resources: { gpus: 1 } }],
    ['readOnly as a string', { volumes: [{ name: 'data', mountPath: '/data', readOnly: 'yes' }] }],
  ])('%s: 400 VALIDATION_FAILED', async (_what, body) => {
    expect(errorCode(await create(node, body))).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
  });

  it('a writable volume means 0 or 1 replicas (VOLUME_NEEDS_ONE_REPLICA); read-only volumes scale', async () => {
    expect(errorCode(await create(node, { replicas: 2, volumes: [data()] }))).toEqual({ status: 400, code: 'VOLUME_NEEDS_ONE_REPLICA' });
    expect((await create(node, { replicas: 3, volumes: [data('/data', true)] })).status).toBe(201);
    const one = await create(node, { replicas: 1, volumes: [data()] });
    expect(one.status).toBe(201);
    expect(errorCode(await panel.api('PATCH', `/v1/services/${one.body.id}`, { replicas: 2 }))).toEqual({ status: 400, code: 'VOLUME_NEEDS_ONE_REPLICA' });
    const scaled = await create(node, { replicas: 2 });
    expect(errorCode(await panel.api('PATCH', `/v1/services/${scaled.body.id}`, { volumes: [data()] }))).toEqual({ status: 400, code: 'VOLUME_NEEDS_ONE_REPLICA' });
    expect((await panel.api('PATCH', `/v1/services/${one.body.id}`, { replicas: 0 })).status).toBe(200);
  });

  it('moving a service with volumes is 409 SERVICE_HAS_VOLUMES unless leaveVolumes is true', async () => {
    const other = (await panel.createNode(`edge-other-${process.pid}`)).name;
    const svc = await create(node, { volumes: [data()] });
    expect(errorCode(await panel.api('PATCH', `/v1/services/${svc.body.id}`, { node: other }))).toEqual({ status: 409, code: 'SERVICE_HAS_VOLUMES' });
    expect((await panel.api('GET', `/v1/services/${svc.body.id}`)).body.nodeName).toBe(node);
    const moved = await panel.api('PATCH', `/v1/services/${svc.body.id}`, { node: other, leaveVolumes: true });
    expect(moved.status).toBe(200);
    expect(moved.body.nodeName).toBe(other);
    // Without volumes a move needs nothing.
    const plain = await create(node, {});
    expect((await panel.api('PATCH', `/v1/services/${plain.body.id}`, { node: other })).status).toBe(200);
  });
});

describe('service command, resources and volumes: capabilities', () => {
  const deploys = (agent: RawAgent) => agent.received.filter((m): m is Extract<PanelMessage, { type: 'deploy' }> => m.type === 'deploy');

  it('an agent that did not announce a capability: the deployment ends failed AGENT_LACKS_CAPABILITY naming it, and is never sent', async () => {
    const node = await panel.createNode(`old-${process.pid}`);
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, capabilities: [CAPABILITIES.WORKLOAD_COMMAND] });
    await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 5_000, message: 'session' });
    const svc = await create(node.name, { command: ['worker'], volumes: [data()] });
    const res = await panel.api('POST', `/v1/services/${svc.body.id}/deployments`, {});
    expect(errorCode(res)).toEqual({ status: 409, code: 'AGENT_LACKS_CAPABILITY' });
    expect(res.body.error.message).toContain('workload.volumes');
    expect(res.body.error.message).not.toContain('workload.command');
    const [row] = await panel.prisma.deployment.findMany({ where: { serviceId: svc.body.id } });
    expect(row).toMatchObject({ status: 'failed', reason: expect.stringMatching(/^AGENT_LACKS_CAPABILITY: .*workload\.volumes/) });
    // A deployment it can run goes out, with the field it announced.
    const worker = await create(node.name, { command: ['worker'] });
    const ok = await panel.api('POST', `/v1/services/${worker.body.id}/deployments`, {});
    expect(ok.status).toBe(202);
    expect(deploys(agent).map((d) => d.workload.serviceId)).toEqual([worker.body.id]);
    expect(deploys(agent)[0]!.workload.command).toEqual(['worker']);
    agent.close();
  });

  it('failover.fence: stored and answered (default false), refused when not a boolean, and a deployment to an agent without workload.fence fails AGENT_LACKS_CAPABILITY naming it', async () => {
    const node = await panel.createNode(`nofence-${process.pid}`);
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, capabilities: ALL });
    await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 5_000, message: 'session' });
    expect((await create(node.name, {})).body.failover).toEqual({ fence: false });
    for (const bad of [{ fence: 'yes' }, { fence: true, after: 5 }, true, {}]) expect(errorCode(await create(node.name, { failover: bad })), JSON.stringify(bad)).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
    const svc = await create(node.name, { failover: { fence: true } });
    expect(svc.body.failover).toEqual({ fence: true });
    const res = await panel.api('POST', `/v1/services/${svc.body.id}/deployments`, {});
    expect(errorCode(res)).toEqual({ status: 409, code: 'AGENT_LACKS_CAPABILITY' });
    expect(res.body.error.message).toContain('workload.fence');
    const [row] = await panel.prisma.deployment.findMany({ where: { serviceId: svc.body.id } });
    expect(row).toMatchObject({ status: 'failed', reason: expect.stringMatching(/^AGENT_LACKS_CAPABILITY: .*workload\.fence/), spec: expect.objectContaining({ failover: { fence: true } }) });
    // PATCH turns it off; the next deployment goes out without the field.
    const off = await panel.api('PATCH', `/v1/services/${svc.body.id}`, { failover: { fence: false } });
    expect(off.body.failover).toEqual({ fence: false });
    expect((await panel.api('POST', `/v1/services/${svc.body.id}/deployments`, {})).status).toBe(202);
    expect(deploys(agent).map((d) => [d.workload.serviceId, 'fence' in d.workload])).toEqual([[svc.body.id, false]]);
    agent.close();
  });

  it('an agent with every capability gets the fields in deploy and in the workloads set, as the deployment spec recorded them', async () => {
    const node = await panel.createNode(`new-${process.pid}`);
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, capabilities: ALL });
    await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 5_000, message: 'session' });
    const svc = await create(node.name, { command: ['sh', '-c'], args: ['exec worker'], resources: { memoryMiB: 64 }, volumes: [data()] });
    const res = await panel.api('POST', `/v1/services/${svc.body.id}/deployments`, {});
    expect(res.status).toBe(202);
    const fields = { command: ['sh', '-c'], args: ['exec worker'], resources: { memoryMiB: 64 }, volumes: [data()] };
    expect(res.body.spec).toMatchObject(fields);
    const [sent] = deploys(agent);
    expect(sent!.workload).toMatchObject(fields);
    // A later change of the service does not change what that deployment carries.
    await panel.api('PATCH', `/v1/services/${svc.body.id}`, { command: null });
    agent.send({ type: 'deploy.result', id: 'r1', deploymentId: res.body.id, status: 'running', reason: 'started', code: null });
    await waitFor(async () => (await panel.prisma.deployment.findUniqueOrThrow({ where: { id: res.body.id } })).status === 'running');
    agent.close();
    const again = await RawAgent.connect({ url: panel.url, token: node.token, capabilities: ALL });
    const set = await again.waitFor<Extract<PanelMessage, { type: 'workloads' }>>((m) => m.type === 'workloads');
    expect(set.workloads).toEqual([expect.objectContaining({ deploymentId: res.body.id, ...fields })]);
    again.close();
    // Rejoining without the capability, the node is not told to run it without its volume.
    const older = await RawAgent.connect({ url: panel.url, token: node.token });
    const without = await older.waitFor<Extract<PanelMessage, { type: 'workloads' }>>((m) => m.type === 'workloads');
    expect(without.workloads).toEqual([]);
    older.close();
  });
});
