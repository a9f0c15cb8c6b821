import { fitsPlacement, NodePool } from './node-pool.js';
import { compareText } from './order.js';
import type {
  Allocation,
  NodeView,
  PendingChange,
  PendingReason,
  PlaceChange,
  RefusedChange,
  ScheduleResult,
  ServiceSpec,
  StopChange,
} from './types.js';

// schedule(services, nodes, allocations) → changes: the whole of "where does
// each replica run", as a pure function (issue 36). Modelled on Nomad's
// reconciler: each service's running allocations are sorted into kept, lost
// (their node is gone) and misplaced (the node no longer fits the service's
// placement); then the count is reconciled with the wanted replicas. Kept
// allocations never move, so adding a node or a replica moves nothing else.
// Rolling a new release and evacuating a node are plans of their own
// (rollout-plan.ts, evacuation-plan.ts); this function places new replicas on
// the service's current release and leaves older ones to those plans.

export const MAX_REPLICAS = 100;

export function emptyResult(): ScheduleResult {
  return { place: [], stop: [], pending: [], refused: [] };
}

/** Replicas the service should run: a writable volume allows one. */
export function wantedReplicas(service: ServiceSpec): number {
  const bounded = Math.max(0, Math.min(MAX_REPLICAS, Math.floor(service.replicas)));
  return service.stateful ? Math.min(bounded, 1) : bounded;
}

export function groupByService(allocations: readonly Allocation[]): Map<string, Allocation[]> {
  const byService = new Map<string, Allocation[]>();
  for (const allocation of allocations) {
    if (allocation.desired !== 'run') continue;
    const list = byService.get(allocation.serviceId);
    if (list) list.push(allocation);
    else byService.set(allocation.serviceId, [allocation]);
  }
  return byService;
}

export function loadByNode(allocations: readonly Allocation[]): Map<string, number> {
  const load = new Map<string, number>();
  for (const allocation of allocations) {
    if (allocation.desired === 'run') load.set(allocation.nodeId, (load.get(allocation.nodeId) ?? 0) + 1);
  }
  return load;
}

export function schedule(
  services: readonly ServiceSpec[],
  nodes: readonly NodeView[],
  allocations: readonly Allocation[],
): ScheduleResult {
  const nodeById = new Map(nodes.map((node) => [node.id, node]));
  const load = loadByNode(allocations);
  const pool = new NodePool(nodes, load);
  const byService = groupByService(allocations);
  const result = emptyResult();
  const ordered = [...services].sort((a, b) => compareText(a.id, b.id));
  const known = new Set<string>();
  for (const service of ordered) {
    known.add(service.id);
    scheduleService(service, byService.get(service.id) ?? [], { nodeById, load, pool, result });
  }
  // Allocations of a service that no longer exists stop like a service scaled to 0.
  for (const [serviceId, list] of byService) {
    if (!known.has(serviceId)) for (const a of list) result.stop.push(stopOf(a, nodeById, 'service-stopped'));
  }
  return result;
}

interface Context {
  nodeById: ReadonlyMap<string, NodeView>;
  load: Map<string, number>;
  pool: NodePool;
  result: ScheduleResult;
}

function stopOf(allocation: Allocation, nodeById: ReadonlyMap<string, NodeView>, cause: StopChange['cause']): StopChange {
  const node = nodeById.get(allocation.nodeId);
  return {
    kind: 'stop',
    allocationId: allocation.id,
    serviceId: allocation.serviceId,
    nodeId: allocation.nodeId,
    drain: !isLost(node) && node!.state === 'live',
    cause,
  };
}

function isLost(node: NodeView | undefined): boolean {
  return node === undefined || node.state === 'lost' || node.decommissioned;
}

function scheduleService(service: ServiceSpec, running: readonly Allocation[], ctx: Context): void {
  const { nodeById, pool, result } = ctx;
  const wanted = wantedReplicas(service);
  if (wanted === 0) {
    for (const allocation of running) result.stop.push(stopOf(allocation, nodeById, 'service-stopped'));
    return;
  }
  const kept: Allocation[] = [];
  const lost: Allocation[] = [];
  const misplaced: Allocation[] = [];
  for (const allocation of running) {
    const node = nodeById.get(allocation.nodeId);
    const bucket = isLost(node) ? lost : fitsPlacement(node!, service.placement) ? kept : misplaced;
    // A stateful replica stays with its data, unless an operator gave its node up (decommissioned or declared lost).
    if (bucket !== kept && service.stateful && !node?.decommissioned) {
      result.refused.push(refusal(service, allocation, node));
      kept.push(allocation);
    } else bucket.push(allocation);
  }

  // The common case of every evaluation: nothing to do, so nothing more is built.
  if (lost.length === 0 && misplaced.length === 0 && kept.length === wanted) return;

  // Too many: shed what would have to move anyway before touching kept replicas.
  let excess = kept.length + lost.length + misplaced.length - wanted;
  while (excess > 0 && lost.length > 0) {
    result.stop.push(stopOf(lost.pop()!, nodeById, 'scale-down'));
    excess--;
  }
  while (excess > 0 && misplaced.length > 0) {
    result.stop.push(stopOf(misplaced.pop()!, nodeById, 'scale-down'));
    excess--;
  }
  for (const victim of scaleDownVictims(kept, excess, ctx.load, nodeById)) {
    result.stop.push(stopOf(victim, nodeById, 'scale-down'));
    pool.adjust(victim.nodeId, -1);
    ctx.load.set(victim.nodeId, (ctx.load.get(victim.nodeId) ?? 0) - 1);
  }

  const onNode = new Map<string, number>();
  for (const allocation of kept) onNode.set(allocation.nodeId, (onNode.get(allocation.nodeId) ?? 0) + 1);
  const pending = new Map<PendingReason, number>();
  const place = (cause: PlaceChange['cause'], replaces?: string): boolean => {
    const pick = pool.pick(service.placement, onNode);
    if ('reason' in pick) {
      pending.set(pick.reason, (pending.get(pick.reason) ?? 0) + 1);
      return false;
    }
    onNode.set(pick.nodeId, (onNode.get(pick.nodeId) ?? 0) + 1);
    ctx.load.set(pick.nodeId, (ctx.load.get(pick.nodeId) ?? 0) + 1);
    const change: PlaceChange = { kind: 'place', serviceId: service.id, nodeId: pick.nodeId, releaseId: service.releaseId, cause };
    if (replaces !== undefined) change.replaces = replaces;
    result.place.push(change);
    return true;
  };
  for (const allocation of lost) {
    // Nothing is left to drain on a lost node: stop it now, replace it where possible.
    result.stop.push(stopOf(allocation, nodeById, 'node-lost'));
    place('node-lost', allocation.id);
  }
  // A misplaced replica keeps running until its replacement is healthy; without one it stays.
  for (const allocation of misplaced) place('placement-changed', allocation.id);
  const missing = wanted - kept.length - lost.length - misplaced.length;
  for (let i = 0; i < missing; i++) place('scale-up');
  for (const [reason, count] of pending) {
    const change: PendingChange = { kind: 'pending', serviceId: service.id, count, reason };
    result.pending.push(change);
  }
}

function refusal(service: ServiceSpec, allocation: Allocation, node: NodeView | undefined): RefusedChange {
  const where = node ? `node ${node.name}` : 'its node';
  return {
    kind: 'refused',
    serviceId: service.id,
    allocationId: allocation.id,
    reason: 'STATEFUL_SERVICE_PINNED',
    message: `the service has a writable volume on ${where}: it stays there (move it with leaveVolumes)`,
  };
}

/**
 * The replicas a scale-down removes: each time the newest replica on the node
 * holding most of the service's replicas, then most allocations overall, ties
 * by name. It is marked to stop after its drain.
 */
export function scaleDownVictims(
  kept: Allocation[],
  count: number,
  load: ReadonlyMap<string, number>,
  nodeById: ReadonlyMap<string, NodeView>,
): Allocation[] {
  const victims: Allocation[] = [];
  if (count <= 0) return victims;
  // Only the nodes this service runs on are compared, so only their loads are copied.
  const nodeLoad = new Map(kept.map((a) => [a.nodeId, load.get(a.nodeId) ?? 0]));
  for (let n = 0; n < count && kept.length > 0; n++) {
    const own = new Map<string, number>();
    for (const a of kept) own.set(a.nodeId, (own.get(a.nodeId) ?? 0) + 1);
    let index = 0;
    for (let i = 1; i < kept.length; i++) {
      if (heavier(kept[i]!, kept[index]!, own, nodeLoad, nodeById)) index = i;
    }
    const [victim] = kept.splice(index, 1);
    victims.push(victim!);
    nodeLoad.set(victim!.nodeId, (nodeLoad.get(victim!.nodeId) ?? 0) - 1);
  }
  return victims;
}

function heavier(
  a: Allocation,
  b: Allocation,
  own: ReadonlyMap<string, number>,
  load: ReadonlyMap<string, number>,
  nodeById: ReadonlyMap<string, NodeView>,
): boolean {
  const ownDiff = (own.get(a.nodeId) ?? 0) - (own.get(b.nodeId) ?? 0);
  if (ownDiff !== 0) return ownDiff > 0;
  const loadDiff = (load.get(a.nodeId) ?? 0) - (load.get(b.nodeId) ?? 0);
  if (loadDiff !== 0) return loadDiff > 0;
  const nameA = nodeById.get(a.nodeId)?.name ?? a.nodeId;
  const nameB = nodeById.get(b.nodeId)?.name ?? b.nodeId;
  if (nameA !== nameB) return nameA < nameB;
  return a.createdAt !== b.createdAt ? a.createdAt > b.createdAt : a.id > b.id;
}
