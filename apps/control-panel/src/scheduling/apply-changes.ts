import type { Allocation, ScheduleResult } from './types.js';

// The allocations once a schedule's changes are carried out and every new
// replica came up healthy: stopped and replaced allocations are gone, placed
// ones run. The executor will do this step by step against the database; here
// it lets tests and the benchmark run the scheduler again on its own output.

export interface NewAllocationIdentity {
  id: string;
  createdAt: number;
}

export function applyChanges(
  allocations: readonly Allocation[],
  changes: ScheduleResult,
  identify: (index: number) => NewAllocationIdentity,
): Allocation[] {
  const gone = new Set<string>(changes.stop.map((stop) => stop.allocationId));
  for (const place of changes.place) if (place.replaces !== undefined) gone.add(place.replaces);
  const next = allocations.filter((a) => a.desired === 'run' && !gone.has(a.id));
  changes.place.forEach((place, index) => {
    const { id, createdAt } = identify(index);
    next.push({ id, createdAt, serviceId: place.serviceId, nodeId: place.nodeId, releaseId: place.releaseId, desired: 'run' });
  });
  return next;
}
