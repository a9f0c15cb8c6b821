import { NodePool } from './node-pool.js';
import { groupByService, loadByNode } from './schedule.js';
import type { Allocation, NodeView, PendingChange, RefusedChange, ServiceSpec } from './types.js';
import { compareText } from './order.js';

// Evacuating a node (issue 36): its allocations move to other nodes one at a
// time, in the order of `moves`; each new replica must be healthy before the
// old one drains, so the service never runs fewer replicas than it wants.
// The node counts as cordoned while the plan is made (the caller cordons it
// for real). Stateful services refuse to move and say why; a replica with no
// eligible node stays where it is and is reported pending. A service whose
// placement names this node alone (or a routed one, kept on its home node)
// refuses too (SERVICE_PINNED_TO_NODE).

export interface EvacuationMove {
  allocationId: string;
  serviceId: string;
  from: string;
  to: string;
  releaseId: string;
}

export interface EvacuationPlan {
  moves: EvacuationMove[];
  refused: RefusedChange[];
  pending: PendingChange[];
}

export function planEvacuation(
  nodeId: string,
  services: readonly ServiceSpec[],
  nodes: readonly NodeView[],
  allocations: readonly Allocation[],
): EvacuationPlan {
  const cordoned = nodes.map((node) => (node.id === nodeId ? { ...node, cordoned: true } : node));
  const evacuated = nodes.find((node) => node.id === nodeId);
  const pool = new NodePool(cordoned, loadByNode(allocations));
  const byService = groupByService(allocations);
  const serviceById = new Map(services.map((service) => [service.id, service]));
  const plan: EvacuationPlan = { moves: [], refused: [], pending: [] };
  const leaving = allocations
    .filter((a) => a.nodeId === nodeId && a.desired === 'run')
    .sort((a, b) => compareText(a.serviceId, b.serviceId) || a.createdAt - b.createdAt || compareText(a.id, b.id));
  const onNodeOf = new Map<string, Map<string, number>>();
  for (const allocation of leaving) {
    const service = serviceById.get(allocation.serviceId);
    if (!service) continue; // a service that no longer exists is stopped by schedule(), not moved
    if (service.stateful) {
      plan.refused.push({
        kind: 'refused',
        serviceId: service.id,
        allocationId: allocation.id,
        reason: 'STATEFUL_SERVICE_PINNED',
        message: `the service has a writable volume on node ${evacuated?.name ?? nodeId}: it does not move with an evacuation (move it with leaveVolumes)`,
      });
      continue;
    }
    let onNode = onNodeOf.get(service.id);
    if (!onNode) {
      onNode = new Map();
      for (const a of byService.get(service.id) ?? []) onNode.set(a.nodeId, (onNode.get(a.nodeId) ?? 0) + 1);
      onNodeOf.set(service.id, onNode);
    }
    const named = service.placement.nodes ?? [];
    if (named.length > 0 && named.every((name) => name === evacuated?.name)) {
      plan.refused.push({
        kind: 'refused',
        serviceId: service.id,
        allocationId: allocation.id,
        reason: 'SERVICE_PINNED_TO_NODE',
        message: `the service may run on node ${evacuated?.name ?? nodeId} only (its placement names it, or it is routed and its home node's agent does not speak cross-node routing (routing.remote)): it does not move with an evacuation`,
      });
      continue;
    }
    const pick = pool.pick(service.placement, onNode);
    if ('reason' in pick) {
      const last = plan.pending.at(-1);
      if (last?.serviceId === service.id && last.reason === pick.reason) last.count++;
      else plan.pending.push({ kind: 'pending', serviceId: service.id, count: 1, reason: pick.reason });
      continue;
    }
    onNode.set(pick.nodeId, (onNode.get(pick.nodeId) ?? 0) + 1);
    plan.moves.push({ allocationId: allocation.id, serviceId: service.id, from: nodeId, to: pick.nodeId, releaseId: allocation.releaseId });
  }
  return plan;
}
