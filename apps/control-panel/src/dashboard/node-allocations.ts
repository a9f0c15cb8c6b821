import type { AllocationView } from '@tether/fleet-wire';
import type { Db } from '../db/database.js';
import { ALLOCATIONS_CAPABILITY } from '../db/where-services-run.js';
import { serviceStatus, STATUS_SERVICE_SELECT } from '../status/service-status.js';
import type { LeftOutLookup } from '../status/status-types.js';
import type { RowSources } from './fleet-rows.js';

// The fleet page's node view of its allocations (issue 36): the replicas of
// services managed by allocations that are placed on the node, each as its
// service's status presents it (status/service-status.ts, the answer of GET
// /v1/services/:id/status: state, health, release, "moved from …"), so the
// page never words a replica otherwise than the API. Two reads for the node,
// whatever it holds: the services with a replica here (at most `limit`, by
// name, each with its allocations) and the count of the node's allocations.
// Unmanaged services are the node view's services table, as before.

/** The node view lists at most this many allocations and says how many more there are. */
export const NODE_ALLOCATIONS_SHOWN = 100;

const { routes: _routes, ...STATUS_WITHOUT_ROUTES } = STATUS_SERVICE_SELECT;

export async function nodeAllocations(
  prisma: Db,
  nodeId: string,
  sources: Pick<RowSources, 'registry' | 'cluster'>,
  leftOut?: LeftOutLookup,
  limit = NODE_ALLOCATIONS_SHOWN,
): Promise<{ items: AllocationView[]; more: number }> {
  // Managed by allocations (db/where-services-run.ts): no home yet, or a home that speaks them.
  const managed = { OR: [{ nodeId: null }, { node: { capabilities: { has: ALLOCATIONS_CAPABILITY } } }] };
  const [services, total] = await Promise.all([
    prisma.service.findMany({
      where: { ...managed, allocations: { some: { nodeId } } },
      orderBy: [{ name: 'asc' }, { id: 'asc' }],
      take: limit,
      select: STATUS_WITHOUT_ROUTES,
    }),
    prisma.allocation.count({ where: { nodeId, service: managed } }),
  ]);
  const now = Date.now();
  const items: AllocationView[] = [];
  for (const service of services) {
    const placed = new Map(service.allocations.map((a) => [a.id, a.createdAt.getTime()]));
    for (const a of serviceStatus(service, sources.registry, now, sources.cluster, leftOut).allocations) {
      if (a.allocationId === null || a.node?.id !== nodeId || items.length >= limit) continue;
      items.push({
        allocationId: a.allocationId,
        serviceId: service.id,
        service: service.name,
        desired: a.desired,
        state: a.state,
        deploymentId: a.deploymentId,
        runningDeploymentId: a.runningDeploymentId,
        health: a.health,
        code: a.code,
        reason: a.reason,
        placedAt: placed.get(a.allocationId) ?? now,
        statusAgeMs: a.evidence?.statusAgeMs ?? null,
        movedFrom: a.movedFrom?.message ?? null,
      });
    }
  }
  return { items, more: Math.max(0, total - items.length) };
}
