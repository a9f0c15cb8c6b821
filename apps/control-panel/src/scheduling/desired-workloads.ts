import type { Allocation } from './types.js';
import { compareText } from './order.js';

// What each node must run, derived from allocations alone (issue 36): the one
// intent path for an agent that announces the allocations capability. A node
// without allocations gets an empty set, which tells its agent to run nothing.
// Allocations marked to stop are absent: the agent drains and removes them.

export interface DesiredWorkload {
  allocationId: string;
  serviceId: string;
  releaseId: string;
}

export function desiredWorkloads(
  nodeIds: readonly string[],
  allocations: readonly Allocation[],
): Map<string, DesiredWorkload[]> {
  const byNode = new Map<string, DesiredWorkload[]>(nodeIds.map((id) => [id, []]));
  const running = allocations
    .filter((a) => a.desired === 'run')
    .sort((a, b) => compareText(a.serviceId, b.serviceId) || a.createdAt - b.createdAt || compareText(a.id, b.id));
  for (const a of running) {
    let list = byNode.get(a.nodeId);
    if (!list) byNode.set(a.nodeId, (list = []));
    list.push({ allocationId: a.id, serviceId: a.serviceId, releaseId: a.releaseId });
  }
  return byNode;
}
