import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, type PanelMessage } from '@tether/protocol';
import { sleep, waitFor } from '@tether/testkit';
import { allocationStatus } from './helpers/allocation-status.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';
import { openTextStream, type TextStream } from './helpers/text-stream.js';

// The drain of a deployment managed by allocations (issue 36, capability allocations.drain), real PostgreSQL, the
// panel's own scheduler, two scripted agents. Each agent answers every `allocations` set with every allocation
// running healthy on its release (so the scheduler rolls a release out node by node); the test sends each node's
// `allocations.drained` itself. The deployment's drain is recorded once it runs and every allocation running it is
// named by a report: the sums over both nodes, the latest end; the events stream ends with `drained` then; a repeat
// or another node's allocation changes nothing; a null count makes the sum null; an agent without the capability
// makes reportsDrain false.

type Allocations = Extract<PanelMessage, { type: 'allocations' }>;
const FULL = [CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.WORKLOAD_DRAIN, CAPABILITIES.ALLOCATIONS_DRAIN];
let panel: Panel;
let teamId: string;
const agents: RawAgent[] = [];
const timers: NodeJS.Timeout[] = [];

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_ALLOCATIONS: 'on', TETHER_SCHEDULER_INTERVAL_MS: '100', TETHER_SCHEDULER_LEASE_MS: '1000', TETHER_DEPLOYMENT_WATCH_MS: '50' } });
  teamId = (await panel.api('POST', '/v1/teams', { name: `alloc-drains-${process.pid}` })).body.id;
});
afterAll(async () => {
  for (const t of timers) clearInterval(t);
  for (const a of agents) a.close();
  await panel?.close();
});

/** A scripted agent that reports every allocation of each set it gets running healthy on its release. */
async function node(name: string, capabilities: string[]) {
  const created = await panel.createNode(`${name}-${process.pid}`);
  const agent = await RawAgent.connect({ url: panel.url, token: created.token, node: created.name, capabilities, heartbeatMs: 300 });
  agents.push(agent);
  let answered = 0;
  timers.push(
    setInterval(() => {
      const sets = agent.received.filter((m): m is Allocations => m.type === 'allocations');
      for (; answered < sets.length; answered++) {
        const set = sets[answered]!;
        agent.send({ type: 'allocations.status', id: `st-${set.id}`, ref: set.id, allocations: set.allocations.map((a) => allocationStatus(a.allocationId, a.serviceId, a.deploymentId)) });
      }
    }, 20),
  );
  await waitFor(async () => (await panel.prisma.node.findUniqueOrThrow({ where: { id: created.id } })).capabilities.length > 0, { timeoutMs: 5_000, message: 'capabilities recorded' });
  return { ...created, agent };
}

/** The allocation ids a node was last sent on `deploymentId`. */
function movedTo(agent: RawAgent, deploymentId: string): string[] {
  const last = agent.received.filter((m): m is Allocations => m.type === 'allocations').at(-1);
  return (last?.allocations ?? []).filter((a) => a.deploymentId === deploymentId).map((a) => a.allocationId);
}

const drained = (agent: RawAgent, deploymentId: string, allocationIds: string[], open: number | null, cut: number | null, endedAt: Date) =>
  agent.send({ type: 'allocations.drained', id: `dr-${deploymentId}-${allocationIds.join('-')}-${open}`, deploymentId, allocationIds, connectionsOpenAtSwitch: open, connectionsCut: cut, drainEndedAt: endedAt.toISOString() });
const deployment = (id: string) => panel.prisma.deployment.findUniqueOrThrow({ where: { id } });
const auth = () => ({ authorization: `Bearer ${panel.operatorToken}` });
const events = (stream: TextStream) => [...stream.text.matchAll(/^event: (\S+)\nid: \d+\ndata: (.*)$/gm)].map((m) => ({ event: m[1]!, data: JSON.parse(m[2]!) }));

async function deploy(serviceId: string) {
  const res = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
  expect(res.status).toBe(201);
  return res.body.id as string;
}

describe('the drain of a deployment across two nodes', () => {
  let a: Awaited<ReturnType<typeof node>>;
  let b: Awaited<ReturnType<typeof node>>;
  let serviceId: string;

  beforeAll(async () => {
    a = await node('drn-a', FULL);
    b = await node('drn-b', FULL);
    const svc = await panel.api('POST', '/v1/services', { teamId, name: 'drains', image: 'tether-test/busybox:1', replicas: 2, placement: { nodes: [a.name, b.name] } });
    expect(svc.status).toBe(201);
    serviceId = svc.body.id;
  });

  it('the first release (nothing replaced): 0/0 from each node, recorded once both are in and it runs', async () => {
    const d1 = await deploy(serviceId);
    await waitFor(async () => (await deployment(d1)).status === 'running', { timeoutMs: 10_000, intervalMs: 25, message: 'd1 running' });
    const placed = await panel.prisma.allocation.findMany({ where: { serviceId, desired: 'run' }, include: { node: true } });
    expect(placed.map((x) => x.node.name).sort()).toEqual([a.name, b.name].sort());
    expect(await deployment(d1)).toMatchObject({ reportsDrain: true, drainEndedAt: null, connectionsOpenAtSwitch: null });
    const at = new Date();
    drained(a.agent, d1, movedTo(a.agent, d1), 0, 0, at);
    await sleep(300);
    await panel.settled();
    expect((await deployment(d1)).drainEndedAt).toBeNull();
    drained(b.agent, d1, movedTo(b.agent, d1), 0, 0, at);
    await waitFor(async () => (await deployment(d1)).drainEndedAt !== null, { timeoutMs: 5_000, intervalMs: 25, message: 'd1 drained' });
    expect(await deployment(d1)).toMatchObject({ connectionsOpenAtSwitch: 0, connectionsCut: 0, drainEndedAt: at });
  });

  it('a release rolled out node by node: the stream stays open past running until both nodes reported, then drained carries the sums', async () => {
    const d2 = await deploy(serviceId);
    const stream = await openTextStream(`${panel.url}/v1/deployments/${d2}/events`, { headers: auth() });
    await waitFor(async () => (await deployment(d2)).status === 'running', { timeoutMs: 10_000, intervalMs: 25, message: 'd2 running' });
    const onA = movedTo(a.agent, d2);
    const onB = movedTo(b.agent, d2);
    expect([onA.length, onB.length]).toEqual([1, 1]);
    await waitFor(() => events(stream).some((e) => e.data.status === 'running'), { message: 'running event' });
    expect(events(stream).at(-1)).toMatchObject({ event: 'deployment', data: { status: 'running', final: true, reportsDrain: true, drainEndedAt: null } });

    // Node a's step: 3 open at its switch, 1 cut. Alone it covers half the replicas: nothing recorded, the stream stays open.
    const endA = new Date(Date.now() - 1_000);
    drained(a.agent, d2, onA, 3, 1, endA);
    // Another node's allocation in a's report is not a's to cover; a repeat of a's report changes nothing.
    drained(a.agent, d2, [...onA, ...onB], 9, 9, new Date());
    drained(a.agent, d2, onB, 9, 9, new Date());
    await sleep(400);
    await panel.settled();
    expect(await deployment(d2)).toMatchObject({ drainEndedAt: null, connectionsOpenAtSwitch: null });
    expect(stream.endedAt).toBeNull();
    expect(await panel.prisma.deploymentDrain.count({ where: { deploymentId: d2 } })).toBe(1);

    // Node b's step: 2 open, 0 cut. Every replica running d2 is covered: 5 open, 1 cut, the later end; drained ends the stream.
    const endB = new Date();
    const reportedAt = Date.now();
    drained(b.agent, d2, onB, 2, 0, endB);
    await stream.ended;
    const endedMs = Date.now() - reportedAt;
    console.log(`managed drain: recorded and the events stream ended ${endedMs} ms after the last node's allocations.drained`);
    expect(endedMs).toBeLessThan(2_000);
    expect(events(stream).at(-1)).toMatchObject({ event: 'drained', data: { id: d2, status: 'running', final: true, reportsDrain: true, connectionsOpenAtSwitch: 5, connectionsCut: 1, drainEndedAt: endB.toISOString() } });
    expect(await deployment(d2)).toMatchObject({ connectionsOpenAtSwitch: 5, connectionsCut: 1, drainEndedAt: endB });
    // The first result is kept: a late report changes nothing.
    drained(b.agent, d2, onB, 7, 7, new Date());
    await sleep(300);
    await panel.settled();
    expect(await deployment(d2)).toMatchObject({ connectionsOpenAtSwitch: 5, connectionsCut: 1, drainEndedAt: endB });
    const api = await panel.api('GET', `/v1/deployments/${d2}`);
    expect(api.body).toMatchObject({ reportsDrain: true, connectionsOpenAtSwitch: 5, connectionsCut: 1, drainEndedAt: endB.toISOString() });
  });

  it('a node whose proxy could not count: the sums are null, the end is still recorded', async () => {
    const d3 = await deploy(serviceId);
    await waitFor(async () => (await deployment(d3)).status === 'running', { timeoutMs: 10_000, intervalMs: 25, message: 'd3 running' });
    const end = new Date();
    drained(a.agent, d3, movedTo(a.agent, d3), null, null, end);
    drained(b.agent, d3, movedTo(b.agent, d3), 4, 2, end);
    await waitFor(async () => (await deployment(d3)).drainEndedAt !== null, { timeoutMs: 5_000, intervalMs: 25, message: 'd3 drained' });
    expect(await deployment(d3)).toMatchObject({ connectionsOpenAtSwitch: null, connectionsCut: null, drainEndedAt: end });
  });
});

describe('a node without allocations.drain', () => {
  it('is not confirmed the capability unless workload.allocations and workload.drain are, and its deployment does not report its drain', async () => {
    const partial = await node('drn-c', [CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.ALLOCATIONS_DRAIN]);
    expect(partial.agent.welcome.capabilities).toEqual([CAPABILITIES.WORKLOAD_ALLOCATIONS]);
    const svc = await panel.api('POST', '/v1/services', { teamId, name: 'nodrain', image: 'tether-test/busybox:1', replicas: 1, placement: { nodes: [partial.name] } });
    expect(svc.status).toBe(201);
    const d = await deploy(svc.body.id);
    await waitFor(async () => (await deployment(d)).status === 'running', { timeoutMs: 10_000, intervalMs: 25, message: 'running' });
    const stream = await openTextStream(`${panel.url}/v1/deployments/${d}/events`, { headers: auth() });
    await stream.ended;
    expect(events(stream).at(-1)).toMatchObject({ event: 'deployment', data: { status: 'running', final: true, reportsDrain: false, drainEndedAt: null } });
    // Its allocations.drained is refused: the session did not agree on the capability.
    drained(partial.agent, d, movedTo(partial.agent, d), 1, 1, new Date());
    await partial.agent.waitFor((m) => m.type === 'error' && m.code === 'UNEXPECTED_MESSAGE');
  });
});
