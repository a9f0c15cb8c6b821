import { describe, expect, it } from 'vitest';
import { evaluate, type AllocationRow, type DeploymentRow, type EvaluationInput, type ServiceRow } from '../src/scheduling/evaluation.js';
import { ALLOCATIONS_CAPABILITY, effectivePlacement, managedByAllocations, nodeViewOf, type NodeFacts } from '../src/scheduling/managed.js';
import { decideRollout, runsHealthy, type RolloutAllocation, type RolloutInput } from '../src/scheduling/rollout-progress.js';
import { node, service } from './scheduling/fixtures.js';

// The scheduler's evaluation as pure functions (issue 36): which services are
// managed by allocations, adoption, placement over capable nodes only, scale,
// and a rollout's steps, success and failure, decided from reported status.

const CAP = [ALLOCATIONS_CAPABILITY];
const facts = (name: string, overrides: Partial<NodeFacts> = {}): NodeFacts => ({
  id: `n-${name}`,
  name,
  live: true,
  cordoned: false,
  decommissioned: false,
  labels: {},
  capabilities: CAP,
  ...overrides,
});
const svc = (id: string, replicas: number, overrides: Partial<ServiceRow> = {}): ServiceRow => ({
  id,
  homeNodeId: 'n-a',
  homeName: 'a',
  replicas,
  placement: {},
  routed: false,
  stateful: false,
  ...overrides,
});
const dep = (id: string, serviceId: string, status: DeploymentRow['status'], createdAt: number): DeploymentRow => ({ id, serviceId, status, createdAt, dispatchedAt: createdAt, reason: null });
const row = (id: string, serviceId: string, nodeName: string, releaseId: string | null, overrides: Partial<AllocationRow> = {}): AllocationRow => ({
  id,
  serviceId,
  nodeId: `n-${nodeName}`,
  releaseId,
  desired: 'run',
  createdAt: 1,
  status: null,
  statusAt: null,
  ...overrides,
});
const healthy = (release: string) => ({ state: 'running', runningDeploymentId: release, health: 'healthy', imageRef: `img@${release}` });

function input(overrides: Partial<EvaluationInput>): EvaluationInput {
  let n = 0;
  return {
    services: [],
    deployments: [],
    nodes: [facts('a'), facts('b'), facts('c')],
    allocations: [],
    now: 10_000,
    progressDeadlineMs: 60_000,
    movedAt: new Map(),
    progressAt: new Map(),
    newId: () => `new-${++n}`,
    ...overrides,
  };
}

describe('managed by allocations', () => {
  it('a service is managed when its home node announced workload.allocations', () => {
    expect(managedByAllocations({ capabilities: CAP })).toBe(true);
    expect(managedByAllocations({ capabilities: ['workload.volumes'] })).toBe(false);
    expect(managedByAllocations({ capabilities: [] })).toBe(false);
  });

  it('a node without the capability keeps its allocations and gets none new (as if cordoned); not live reads unreachable', () => {
    expect(nodeViewOf(facts('x', { capabilities: [] }))).toMatchObject({ cordoned: true, state: 'live' });
    expect(nodeViewOf(facts('x', { live: false }))).toMatchObject({ cordoned: false, state: 'unreachable' });
  });

  it('a routed or stateful service stays on its home node; otherwise its placement as stored', () => {
    expect(effectivePlacement({ homeName: 'a', placement: { nodes: ['b', 'c'], labels: { zone: 'x' } }, routed: true })).toEqual({ nodes: ['a'] });
    expect(effectivePlacement({ homeName: 'a', placement: { nodes: ['b'], labels: { zone: 'x' } }, routed: false })).toEqual({ nodes: ['b'], labels: { zone: 'x' } });
    expect(effectivePlacement({ homeName: 'a', placement: null, routed: false })).toEqual({});
    // A writable volume keeps the replica with its data on the home node.
    expect(effectivePlacement({ homeName: 'a', placement: {}, routed: false, stateful: true })).toEqual({ nodes: ['a'] });
  });
});

describe('evaluate', () => {
  it('replicas 3 over three capable nodes: one allocation each, on the target release; a node without the capability gets none', () => {
    const plan = evaluate(
      input({
        nodes: [facts('a'), facts('b'), facts('c'), facts('d', { capabilities: [] })],
        services: [svc('s', 3)],
        deployments: [dep('d1', 's', 'pending', 1)],
      }),
    );
    expect(plan.insert.map((r) => `${r.nodeId}:${r.releaseId}:${r.cause}`).sort()).toEqual(['n-a:d1:scale-up', 'n-b:d1:scale-up', 'n-c:d1:scale-up']);
    expect(plan.changedNodes).toEqual(['n-a', 'n-b', 'n-c']);
    // Placed on the target: they must report it healthy before the deployment runs.
    expect(plan.deployments).toEqual([{ kind: 'progress', id: 'd1', reason: 'rolling out across nodes: 0 of 3 replicas run this release healthy' }]);
  });

  it('a managed service without allocations adopts its home node\'s replicas on its running release before spreading', () => {
    const plan = evaluate(input({ services: [svc('s', 2)], deployments: [dep('d1', 's', 'running', 1)] }));
    expect(plan.insert.map((r) => `${r.nodeId}:${r.releaseId}:${r.cause}`)).toEqual(['n-a:d1:adopted', 'n-a:d1:adopted']);
    expect(plan.stop).toEqual([]);
    expect(plan.deployments).toEqual([]);
  });

  it('replicas 2 of 3 stops exactly one; a stopped allocation reported removed is deleted', () => {
    const allocations = [row('x1', 's', 'a', 'd1', { createdAt: 1 }), row('x2', 's', 'b', 'd1', { createdAt: 2 }), row('x3', 's', 'c', 'd1', { createdAt: 3 })];
    const plan = evaluate(input({ services: [svc('s', 2)], deployments: [dep('d1', 's', 'running', 1)], allocations }));
    expect(plan.stop.map((s) => s.allocationId)).toHaveLength(1);
    expect(plan.insert).toEqual([]);
    const after = evaluate(
      input({
        services: [svc('s', 2)],
        deployments: [dep('d1', 's', 'running', 1)],
        allocations: [...allocations.slice(0, 2), { ...allocations[2]!, desired: 'stop', status: { state: 'removed' } }],
      }),
    );
    expect(after.remove).toEqual(['x3']);
    expect(after.stop).toEqual([]);
    expect(after.changedNodes).toEqual([]);
  });

  it('an unrouted service pinned by placement stays there; a routed one stays home', () => {
    const pinned = evaluate(input({ services: [svc('s', 2, { placement: { nodes: ['b'] } })], deployments: [dep('d1', 's', 'pending', 1)] }));
    expect(pinned.insert.map((r) => r.nodeId)).toEqual(['n-b', 'n-b']);
    const routed = evaluate(input({ services: [svc('s', 2, { routed: true })], deployments: [dep('d1', 's', 'pending', 1)] }));
    expect(routed.insert.map((r) => r.nodeId)).toEqual(['n-a', 'n-a']);
  });

  it('older deployments in flight are superseded by the newest', () => {
    const plan = evaluate(input({ services: [svc('s', 0)], deployments: [dep('d1', 's', 'pending', 1), dep('d2', 's', 'pending', 2)] }));
    expect(plan.deployments).toContainEqual({ kind: 'superseded', id: 'd1', reason: 'replaced by deployment d2' });
    expect(plan.deployments).toContainEqual(expect.objectContaining({ kind: 'running', id: 'd2' }));
  });
});

describe('evaluate: a service\'s rollout settings', () => {
  const four = [facts('a'), facts('b'), facts('c'), facts('d')];
  const olds = (serviceId: string) => ['a', 'b', 'c', 'd'].map((n, i) => row(`${serviceId}${i + 1}`, serviceId, n, 'd1', { createdAt: i + 1, status: healthy('d1') }));
  const deployments = (serviceId: string) => [dep('d1', serviceId, 'running', 1), dep('d2', serviceId, 'pending', 2)].map((d) => (serviceId === 's' ? d : { ...d, id: `${serviceId}-${d.id}` }));

  it('maxSurge 2: two replicas move at once, the next two once both run the release healthy', () => {
    const rollout = { maxSurge: 2, maxUnavailable: null, progressDeadlineSeconds: null };
    const first = evaluate(input({ nodes: four, services: [svc('s', 4, { rollout })], deployments: deployments('s'), allocations: olds('s') }));
    expect(first.moves).toEqual([{ serviceId: 's', releaseId: 'd2', allocationIds: ['s1', 's2'] }]);
    expect(first.changedNodes).toEqual(['n-a', 'n-b']);
    // One of the two healthy: wait for the other.
    const moved = olds('s').map((a, i) => (i < 2 ? { ...a, releaseId: 'd2', status: i === 0 ? healthy('d2') : a.status } : a));
    expect(evaluate(input({ nodes: four, services: [svc('s', 4, { rollout })], deployments: deployments('s'), allocations: moved })).moves).toEqual([]);
    const both = moved.map((a, i) => (i < 2 ? { ...a, status: healthy('d2') } : a));
    expect(evaluate(input({ nodes: four, services: [svc('s', 4, { rollout })], deployments: deployments('s'), allocations: both })).moves).toEqual([{ serviceId: 's', releaseId: 'd2', allocationIds: ['s3', 's4'] }]);
    // Without settings: one at a time.
    expect(evaluate(input({ nodes: four, services: [svc('s', 4)], deployments: deployments('s'), allocations: olds('s') })).moves).toEqual([{ serviceId: 's', releaseId: 'd2', allocationIds: ['s1'] }]);
  });

  it('maxSurge 0, maxUnavailable 1: one replica at a time', () => {
    const rollout = { maxSurge: 0, maxUnavailable: 1, progressDeadlineSeconds: null };
    expect(evaluate(input({ nodes: four, services: [svc('s', 4, { rollout })], deployments: deployments('s'), allocations: olds('s') })).moves).toEqual([
      { serviceId: 's', releaseId: 'd2', allocationIds: ['s1'] },
    ]);
  });

  it('the progress deadline per service: a service\'s own fails past it while another waits for the panel\'s', () => {
    const quick = { maxSurge: null, maxUnavailable: null, progressDeadlineSeconds: 2 };
    const stuck = (serviceId: string) => olds(serviceId).map((a, i) => (i === 0 ? { ...a, releaseId: `${serviceId === 's' ? '' : `${serviceId}-`}d2` } : a));
    const at = (now: number) =>
      evaluate(
        input({
          nodes: four,
          now,
          progressDeadlineMs: 60_000,
          services: [svc('s', 4, { rollout: quick }), svc('t', 4)],
          deployments: [...deployments('s'), ...deployments('t')],
          allocations: [...stuck('s'), ...stuck('t')],
          progressAt: new Map([
            ['d2', 1_000],
            ['t-d2', 1_000],
          ]),
        }),
      ).deployments;
    // 2 s after the last step: both wait.
    expect(at(3_000).map((d) => d.kind)).toEqual(['progress', 'progress']);
    const past = at(3_001);
    expect(past).toContainEqual({ kind: 'failed', id: 'd2', reason: expect.stringMatching(/^PROGRESS_DEADLINE_EXCEEDED: no progress for 2 s: node a not running it healthy/) });
    expect(past).toContainEqual(expect.objectContaining({ kind: 'progress', id: 't-d2' }));
    // The panel's deadline still ends the other one.
    expect(at(61_001)).toContainEqual(expect.objectContaining({ kind: 'failed', id: 't-d2', reason: expect.stringMatching(/no progress for 60 s/) }));
  });

  it('a stored surge its volume cannot take (a row the API did not write) rolls out with the defaults: nothing else stops', () => {
    const rollout = { maxSurge: 2, maxUnavailable: null, progressDeadlineSeconds: null };
    const plan = evaluate(input({ services: [svc('s', 1, { stateful: true, rollout })], deployments: deployments('s'), allocations: [row('s1', 's', 'a', 'd1', { status: healthy('d1') })] }));
    expect(plan.moves).toEqual([{ serviceId: 's', releaseId: 'd2', allocationIds: ['s1'] }]);
  });
});

describe('decideRollout', () => {
  const nodes = new Map([node('a'), node('b'), node('c')].map((n) => [n.id, n]));
  const on = (id: string, name: string, releaseId: string | null, status: RolloutAllocation['status'] = null, statusAt: number | null = null): RolloutAllocation => ({
    id,
    nodeId: `n-${name}`,
    releaseId,
    createdAt: Number(id.slice(1)),
    status,
    statusAt,
  });
  const base = (allocations: RolloutAllocation[], extra: Partial<RolloutInput> = {}): RolloutInput => ({
    service: service('s', 3, { releaseId: 'r2' }),
    allocations,
    wanted: 3,
    target: { id: 'r2', status: 'pending', createdAt: 100, dispatchedAt: 100, reason: null },
    previous: 'r1',
    nodes,
    now: 1_000,
    progressDeadlineMs: 5_000,
    movedAt: new Map(),
    progressAt: undefined,
    ...extra,
  });

  it('one step at a time (maxSurge 1), node by node, each once every replica on the target runs it healthy', () => {
    const old = [on('x1', 'a', 'r1', healthy('r1')), on('x2', 'b', 'r1', healthy('r1')), on('x3', 'c', 'r1', healthy('r1'))];
    expect(decideRollout(base(old))).toMatchObject({ kind: 'step', allocationIds: ['x1'] });
    // Moved, not reported yet: wait.
    const moved = [on('x1', 'a', 'r2', healthy('r1')), old[1]!, old[2]!];
    expect(decideRollout(base(moved))).toMatchObject({ kind: 'wait', reason: 'rolling out across nodes: 0 of 3 replicas run this release healthy' });
    // Running the new release but its health check has not passed yet: still wait.
    expect(decideRollout(base([on('x1', 'a', 'r2', { state: 'running', runningDeploymentId: 'r2', health: 'starting' }), old[1]!, old[2]!])).kind).toBe('wait');
    const first = [on('x1', 'a', 'r2', healthy('r2')), old[1]!, old[2]!];
    expect(decideRollout(base(first))).toMatchObject({ kind: 'step', allocationIds: ['x2'] });
    const all = [on('x1', 'a', 'r2', healthy('r2')), on('x2', 'b', 'r2', healthy('r2')), on('x3', 'c', 'r2', healthy('r2'))];
    expect(decideRollout(base(all))).toEqual({ kind: 'running', reason: 'running: 3 of 3 replicas run it healthy on a, b, c', imageRef: 'img@r2' });
  });

  it('a failure reported after the move fails the deployment naming the node and moves its replicas back', () => {
    const failed = { state: 'failed', runningDeploymentId: 'r1', health: 'healthy', code: 'HEALTH_CHECK_FAILED', reason: 'GET / answered 500' };
    const decision = decideRollout(base([on('x1', 'a', 'r2', healthy('r2')), on('x2', 'b', 'r2', failed, 500), on('x3', 'c', 'r1', healthy('r1'))], { movedAt: new Map([['x2', 400]]) }));
    expect(decision).toEqual({
      kind: 'failed',
      reason: 'HEALTH_CHECK_FAILED: GET / answered 500 (on node b); every replica moved to it goes back to release r1',
      revert: { allocationIds: ['x1', 'x2'], to: 'r1' },
    });
    // A failure reported before the move was for the old release: not this one's.
    expect(decideRollout(base([on('x2', 'b', 'r2', failed, 300), on('x1', 'a', 'r1', healthy('r1')), on('x3', 'c', 'r1', healthy('r1'))], { movedAt: new Map([['x2', 400]]) })).kind).toBe('wait');
  });

  it('past the progress deadline with a node unreachable: failed, the node named', () => {
    const away = new Map(nodes);
    away.set('n-b', { ...node('b'), state: 'unreachable' });
    const decision = decideRollout(base([on('x1', 'a', 'r2', healthy('r2')), on('x2', 'b', 'r2', healthy('r1')), on('x3', 'c', 'r1', healthy('r1'))], { nodes: away, now: 6_000, progressAt: 500 }));
    expect(decision).toMatchObject({ kind: 'failed', revert: { allocationIds: ['x1', 'x2'], to: 'r1' } });
    expect(decision.kind === 'failed' && decision.reason).toMatch(/^PROGRESS_DEADLINE_EXCEEDED: no progress for 5 s: node b unreachable;/);
    // Within the deadline: wait.
    expect(decideRollout(base([on('x2', 'b', 'r2', healthy('r1'))], { nodes: away, now: 5_400, progressAt: 500, wanted: 1 })).kind).toBe('wait');
  });

  it('allocations without a release move all at once; a healthy status is the agent verdict (none counts, starting does not)', () => {
    expect(decideRollout(base([on('x1', 'a', null), on('x2', 'b', null), on('x3', 'c', null)]))).toMatchObject({ kind: 'step', allocationIds: ['x1', 'x2', 'x3'] });
    expect(runsHealthy({ state: 'running', runningDeploymentId: 'r2', health: 'none' }, 'r2')).toBe(true);
    expect(runsHealthy({ state: 'running', runningDeploymentId: 'r2', health: 'unhealthy' }, 'r2')).toBe(false);
    expect(runsHealthy({ state: 'running', runningDeploymentId: 'r1', health: 'healthy' }, 'r2')).toBe(false);
  });
});
