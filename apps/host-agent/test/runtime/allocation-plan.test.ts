import { describe, expect, it } from 'vitest';
import { EXAMPLE_MESSAGES, type Allocation, type Release } from '@tether/protocol';
import { failedKey, planAllocations, type AllocatedContainer, type AllocationPlanInput } from '../../src/runtime/allocation-plan.js';

// The allocations set against what runs, without Docker: ownership, adoption, rollouts, removals.

const [v7, v8] = EXAMPLE_MESSAGES.allocations.releases as [Release, Release];
const releases = new Map([[v7.deploymentId, v7], [v8.deploymentId, v8]]);
const alloc = (allocationId: string, deploymentId = 'dep_07', serviceId = 'svc_01'): Allocation => ({ allocationId, serviceId, deploymentId });
let seq = 0;
const box = (id: string, allocationId: string | null, deploymentId = 'dep_07', over: Partial<AllocatedContainer> = {}): AllocatedContainer => ({
  id, name: `tether-web-${id}`, serviceId: 'svc_01', deploymentId, replica: null, ...(allocationId ? { allocationId } : {}),
  state: 'running', exitCode: null, health: 'none', createdAt: 1000 + seq++, startedAt: 1000, finishedAt: null, ...over,
});
const input = (over: Partial<AllocationPlanInput>): AllocationPlanInput => ({
  allocations: [], releases, containers: [], bindings: new Map(), failed: new Set(), draining: new Set(), ...over,
});

describe('planAllocations', () => {
  it('three new allocations of one service: one rollout of three new containers, nothing retired', () => {
    const plan = planAllocations(input({ allocations: [alloc('a1'), alloc('a2'), alloc('a3')] }));
    expect(plan.rollouts).toEqual([{ serviceId: 'svc_01', release: v7, allocations: ['a1', 'a2', 'a3'].map((allocationId) => ({ allocationId, retire: null })) }]);
    expect(plan.retire).toEqual([]);
  });

  it('allocations matching what runs: every container kept, nothing to do (an agent restart changes nothing)', () => {
    const containers = [box('c1', 'a1'), box('c2', 'a2'), box('c3', 'a3')];
    const plan = planAllocations(input({ allocations: [alloc('a1'), alloc('a2'), alloc('a3')], containers }));
    expect([...plan.bindings]).toEqual([['a1', 'c1'], ['a2', 'c2'], ['a3', 'c3']]);
    expect(plan.rollouts).toEqual([]);
    expect(plan.retire).toEqual([]);
  });

  it('3 → 2: exactly the container of the allocation left out is retired', () => {
    const containers = [box('c1', 'a1'), box('c2', 'a2'), box('c3', 'a3')];
    const plan = planAllocations(input({ allocations: [alloc('a1'), alloc('a2')], containers }));
    expect(plan.retire.map((c) => c.id)).toEqual(['c3']);
    expect(plan.rollouts).toEqual([]);
  });

  it('an upgrade adopts the unlabelled containers of a service, its release first and oldest first: nothing restarts', () => {
    const old = box('old', null, 'dep_06');
    const containers = [box('c1', null), box('c2', null), old];
    const plan = planAllocations(input({ allocations: [alloc('a1'), alloc('a2')], containers }));
    expect([...plan.bindings]).toEqual([['a1', 'c1'], ['a2', 'c2']]);
    expect(plan.rollouts).toEqual([]);
    expect(plan.retire.map((c) => c.id)).toEqual(['old']);
  });

  it('an adoption recorded before an agent restart binds the same unlabelled container again', () => {
    const containers = [box('c1', null), box('c2', null)];
    const plan = planAllocations(input({ allocations: [alloc('a1')], containers, bindings: new Map([['a1', 'c2']]) }));
    expect([...plan.bindings]).toEqual([['a1', 'c2']]);
    expect(plan.retire.map((c) => c.id)).toEqual(['c1']);
  });

  it('a change of release: one rollout per service and release, each allocation replacing its own container', () => {
    const containers = [box('c1', 'a1'), box('c2', 'a2'), box('c3', 'a3')];
    const plan = planAllocations(input({ allocations: [alloc('a1', 'dep_08'), alloc('a2', 'dep_08'), alloc('a3')], containers }));
    expect(plan.rollouts).toHaveLength(1);
    expect(plan.rollouts[0]!.release).toBe(v8);
    expect(plan.rollouts[0]!.allocations.map((a) => [a.allocationId, a.retire?.id])).toEqual([['a1', 'c1'], ['a2', 'c2']]);
    expect(plan.retire).toEqual([]);
  });

  it('mid-rollout both containers of an allocation are labelled: the one on the target release serves, the other is retired', () => {
    const containers = [box('c1', 'a1', 'dep_07'), box('n1', 'a1', 'dep_08')];
    const plan = planAllocations(input({ allocations: [alloc('a1', 'dep_08')], containers }));
    expect(plan.bindings.get('a1')).toBe('n1');
    expect(plan.retire.map((c) => c.id)).toEqual(['c1']);
  });

  it('a release that failed for an allocation is not tried again; its old container keeps serving', () => {
    const containers = [box('c1', 'a1')];
    const plan = planAllocations(input({ allocations: [alloc('a1', 'dep_08')], containers, failed: new Set([failedKey('a1', 'dep_08')]) }));
    expect(plan.rollouts).toEqual([]);
    expect(plan.failed).toEqual(['a1']);
    expect(plan.bindings.get('a1')).toBe('c1');
    expect(plan.retire).toEqual([]);
  });

  it('draining and removed containers are neither owned nor retired again', () => {
    const containers = [box('c1', 'a1'), box('gone', null, 'dep_07', { state: 'removing' }), box('d1', null)];
    const plan = planAllocations(input({ allocations: [alloc('a1')], containers, draining: new Set(['d1']) }));
    expect(plan.retire).toEqual([]);
  });

  it('a container of another service is never adopted', () => {
    const other = box('x1', null, 'dep_07', { serviceId: 'svc_02' });
    const plan = planAllocations(input({ allocations: [alloc('a1')], containers: [other] }));
    expect(plan.bindings.size).toBe(0);
    expect(plan.rollouts[0]!.allocations).toEqual([{ allocationId: 'a1', retire: null }]);
    expect(plan.retire.map((c) => c.id)).toEqual(['x1']);
  });
});
