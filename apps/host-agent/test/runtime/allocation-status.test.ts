import { describe, expect, it } from 'vitest';
import { encode, type Allocation } from '@tether/protocol';
import type { AllocatedContainer } from '../../src/runtime/allocation-plan.js';
import { allocationStatuses, type AllocationStatusInput } from '../../src/runtime/allocation-status.js';

const box = (id: string, deploymentId: string, allocationId: string | null = null): AllocatedContainer => ({
  id, name: id, serviceId: 'svc_01', deploymentId, replica: null, ...(allocationId ? { allocationId } : {}), state: 'running', exitCode: null, health: 'none', createdAt: 1, startedAt: 1, finishedAt: null,
});
const alloc = (allocationId: string, deploymentId: string): Allocation => ({ allocationId, serviceId: 'svc_01', deploymentId });
const base = (over: Partial<AllocationStatusInput>): AllocationStatusInput => ({
  allocations: [], containers: [], bindings: new Map(), failure: () => undefined, rolling: new Map(), draining: [],
  health: () => 'healthy', imageRefs: new Map(), previous: new Map(), now: '2026-12-03T10:00:00.000Z', ...over,
});

describe('allocationStatuses', () => {
  it('running, rolling, failed (old release still serving), pending and draining, each as the report says', () => {
    const containers = [box('c1', 'dep_08', 'a1'), box('c2', 'dep_07', 'a2'), box('c3', 'dep_07', 'a3'), box('c9', 'dep_07', 'a9')];
    const statuses = allocationStatuses(base({
      allocations: [alloc('a1', 'dep_08'), alloc('a2', 'dep_08'), alloc('a3', 'dep_08'), alloc('a4', 'dep_08')],
      containers,
      bindings: new Map([['a1', 'c1'], ['a2', 'c2'], ['a3', 'c3']]),
      rolling: new Map([['a2', 'starting']]),
      failure: (id, dep) => (id === 'a3' && dep === 'dep_08' ? { allocationId: id, deploymentId: dep, code: 'HEALTHCHECK_FAILED', reason: 'GET /healthz 500', at: 1 } : undefined),
      draining: [{ allocationId: 'a9', container: containers[3]! }],
      imageRefs: new Map([['dep_08', 'web@sha256:aa']]),
    }));
    expect(statuses.map((s) => [s.allocationId, s.state, s.runningDeploymentId, s.containerId, s.code])).toEqual([
      ['a1', 'running', 'dep_08', 'c1', null],
      ['a2', 'starting', 'dep_07', 'c2', null],
      ['a3', 'failed', 'dep_07', 'c3', 'HEALTHCHECK_FAILED'],
      ['a4', 'pending', null, null, null],
      ['a9', 'draining', 'dep_07', 'c9', null],
    ]);
    expect(statuses[0]!.imageRef).toBe('web@sha256:aa');
    expect(statuses[1]!.imageRef).toBeUndefined();
    expect(() => encode({ type: 'allocations.status', id: 'a-1', ref: 'p-1', allocations: statuses })).not.toThrow();
  });

  it('routing.remote: a running container\'s published endpoint, null when unpublished, stopped or draining; no field when nothing is published', () => {
    const stopped = { ...box('c3', 'dep_07', 'a3'), state: 'exited' as const };
    const containers = [box('c1', 'dep_07', 'a1'), box('c2', 'dep_07', 'a2'), stopped, box('c9', 'dep_07', 'a9')];
    const published = new Map([['c1', '10.0.0.7:32768'], ['c3', '10.0.0.7:32769'], ['c9', '10.0.0.7:32770']]);
    const input = base({
      allocations: [alloc('a1', 'dep_07'), alloc('a2', 'dep_07'), alloc('a3', 'dep_07')],
      containers,
      bindings: new Map([['a1', 'c1'], ['a2', 'c2'], ['a3', 'c3']]),
      draining: [{ allocationId: 'a9', container: containers[3]! }],
    });
    const statuses = allocationStatuses({ ...input, endpoint: (c) => published.get(c.id) ?? null });
    expect(statuses.map((s) => [s.allocationId, s.endpoint])).toEqual([['a1', '10.0.0.7:32768'], ['a2', null], ['a3', null], ['a9', null]]);
    expect(() => encode({ type: 'allocations.status', id: 'a-1', ref: 'p-1', allocations: statuses })).not.toThrow();
    expect(allocationStatuses(input).some((s) => 'endpoint' in s)).toBe(false);
  });

  it('`since` moves only when the state does', () => {
    const input = base({ allocations: [alloc('a1', 'dep_07')], containers: [box('c1', 'dep_07', 'a1')], bindings: new Map([['a1', 'c1']]) });
    const [first] = allocationStatuses(input);
    const later = { ...input, now: '2026-12-03T11:00:00.000Z', previous: new Map([['a1', first!]]) };
    expect(allocationStatuses(later)[0]!.since).toBe(first!.since);
    expect(allocationStatuses({ ...later, rolling: new Map([['a1', 'pending']]) })[0]!.since).toBe('2026-12-03T11:00:00.000Z');
  });
});
