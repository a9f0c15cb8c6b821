import { applyChanges } from '../../src/scheduling/apply-changes.js';
import type { Allocation, NodeView, ScheduleResult, ServiceSpec } from '../../src/scheduling/types.js';

// Plain-data builders for the scheduler tests: nodes, services, allocations.

export function node(name: string, overrides: Partial<NodeView> = {}): NodeView {
  return { id: `n-${name}`, name, state: 'live', cordoned: false, decommissioned: false, labels: {}, ...overrides };
}

export function nodes(count: number, prefix = 'node'): NodeView[] {
  return Array.from({ length: count }, (_, i) => node(`${prefix}-${String(i).padStart(4, '0')}`));
}

export function service(id: string, replicas: number, overrides: Partial<ServiceSpec> = {}): ServiceSpec {
  return { id, releaseId: `${id}-r1`, replicas, placement: {}, stateful: false, ...overrides };
}

export function alloc(id: string, serviceId: string, nodeName: string, createdAt: number, overrides: Partial<Allocation> = {}): Allocation {
  return { id, serviceId, nodeId: `n-${nodeName}`, releaseId: `${serviceId}-r1`, createdAt, desired: 'run', ...overrides };
}

/** Carries out changes with fresh ids (a-1, a-2, …) and ever-growing creation times. */
export function applier(start = 1000): (allocations: readonly Allocation[], changes: ScheduleResult) => Allocation[] {
  let next = start;
  return (allocations, changes) =>
    applyChanges(allocations, changes, () => {
      next++;
      return { id: `a-${next}`, createdAt: next };
    });
}

export function countBy<T>(items: readonly T[], key: (item: T) => string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
  return counts;
}

/** A small seeded PRNG (mulberry32) so every property case can be replayed from its seed. */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
