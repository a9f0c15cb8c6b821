import { compareText } from './order.js';
import { effectivePlacement, nodeViewOf } from './managed.js';
import type { RolloutAllocation } from './rollout-progress.js';
import { holdFenced, paceReplacements } from './failover-policy.js';
import { schedule, wantedReplicas } from './schedule.js';
import { homesOf, pendingWrites } from './homes.js';
import { groupBy, releasesOf, type AllocationRow, type EvaluationInput, type EvaluationPlan, type NewAllocation } from './evaluation-plan.js';
import { evacuate } from './evaluation-evacuation.js';
import { stepRollout } from './evaluation-rollouts.js';
import type { Allocation, ServiceSpec } from './types.js';

export * from './evaluation-plan.js';
export { previewEvacuation, type EvacuationPreview } from './evaluation-evacuation.js';

// One evaluation of the scheduler over managed services (issue 36), as a pure
// function of rows: the loop (cluster/scheduler-loop.ts) reads them inside its
// epoch-fenced transaction, calls this, and writes the plan in the same
// transaction. In order:
// 1. A managed service without any allocation adopts the replicas its home
//    node runs now: one allocation per wanted replica there, on its running
//    release (nothing restarts), before anything spreads. A service without a
//    home (homes.ts) has nothing to adopt: its first placed replica's node
//    becomes its home, and why replicas wait is recorded when it changes.
// 2. schedule() places and stops (scale, lost and misplaced replicas).
//    An evacuating node's replica whose replacement is placed (the service runs
//    more than it wants) is *leaving*: schedule() does not see it.
// 2b. Evacuations (evaluation-evacuation.ts), one move at a time per node: a leaving replica is stopped
//    (drained) once the service has as many healthy replicas without it as it
//    wants; with none under way, planEvacuation's next move places a new one.
// 3. Each service with a target release (its newest deployment that is not
//    final, else its running one) rolls out step by step (evaluation-rollouts.ts,
//    rollout-progress.ts).
// The rows it reads and the plan it returns are evaluation-plan.ts.
// 4. Allocations marked stop that their node no longer has are deleted.
// 5. Older deployments still in flight are superseded by the target.

export function evaluate(input: EvaluationInput): EvaluationPlan {
  const plan: EvaluationPlan = { insert: [], stop: [], remove: [], moves: [], deployments: [], pending: [], refused: [], evacuations: [], changedNodes: [], moved: [], progressed: [], deferred: 0, homes: [], pendingWrites: [] };
  const states = input.failover?.states;
  const nodeViews = input.nodes.map((n) => {
    const view = nodeViewOf(n);
    const state = states?.get(n.id);
    return state && !n.live ? { ...view, state } : view;
  });
  const evacuating = new Set(nodeViews.filter((n) => n.evacuating).map((n) => n.id));
  /** Replicas on an evacuating node whose replacement exists: kept out of schedule() and of rollouts. */
  const leaving = new Map<string, AllocationRow>();
  const nodeById = new Map(nodeViews.map((n) => [n.id, n]));
  const deploymentsBy = groupBy(input.deployments, (d) => d.serviceId);
  const allocationsBy = groupBy(input.allocations, (a) => a.serviceId);
  const specs: ServiceSpec[] = [];
  const releases = new Map<string, ReturnType<typeof releasesOf>>();
  const forSchedule: Allocation[] = [];
  const adopted = new Map<string, NewAllocation>();
  const toAllocation = (a: { id: string; serviceId: string; nodeId: string; releaseId: string | null; createdAt: number }): Allocation => ({
    id: a.id,
    serviceId: a.serviceId,
    nodeId: a.nodeId,
    releaseId: a.releaseId ?? '',
    createdAt: a.createdAt,
    desired: 'run',
  });

  for (const service of input.services) {
    const found = releasesOf(deploymentsBy.get(service.id) ?? []);
    releases.set(service.id, found);
    const spec: ServiceSpec = {
      id: service.id,
      releaseId: found.target?.id ?? '',
      replicas: service.replicas,
      placement: effectivePlacement(service),
      stateful: service.stateful,
      ...(service.fenced ? { fenced: true } : {}),
    };
    specs.push(spec);
    const own = allocationsBy.get(service.id) ?? [];
    if (evacuating.size > 0) {
      // More replicas than wanted while some sit on an evacuating node: those (oldest first) are the ones leaving.
      let surplus = own.filter((a) => a.desired === 'run').length - wantedReplicas(spec);
      const there = own.filter((a) => a.desired === 'run' && evacuating.has(a.nodeId)).sort((a, b) => a.createdAt - b.createdAt || compareText(a.id, b.id));
      for (const a of there) if (surplus-- > 0) leaving.set(a.id, a);
    }
    for (const a of own) if (a.desired === 'run' && !leaving.has(a.id)) forSchedule.push(toAllocation(a));
    // 1. Adoption: the replicas its home node runs become its allocations, on the release they run.
    if (own.length === 0 && found.running && service.homeNodeId !== null) {
      for (let i = 0; i < wantedReplicas(spec); i++) {
        const row: NewAllocation = { id: input.newId(), serviceId: service.id, nodeId: service.homeNodeId, releaseId: found.running.id, cause: 'adopted' };
        adopted.set(row.id, row);
        forSchedule.push(toAllocation({ ...row, createdAt: input.now }));
      }
    }
    // 5. Older deployments in flight never run: the target replaces them.
    for (const older of found.older) plan.deployments.push({ kind: 'superseded', id: older.id, reason: `replaced by deployment ${found.target!.id}` });
  }

  // 2. Places and stops.
  let result = schedule(specs, nodeViews, forSchedule);
  if (input.failover) {
    const fenced = new Set(input.services.filter((s) => s.fenced).map((s) => s.id));
    result = holdFenced(result, fenced, input.failover.fenceHeld ?? new Set());
    const createdAt = new Map(input.services.map((service) => [service.id, service.createdAt ?? 0]));
    const paced = paceReplacements(result, input.failover.budget, createdAt);
    result = paced.result;
    plan.deferred = paced.deferred;
  }
  plan.pending = result.pending;
  plan.refused = result.refused;
  plan.homes = homesOf(input.services, result.place);
  plan.pendingWrites = pendingWrites(input.services, new Map(specs.map((s) => [s.id, s.placement])), result.pending);
  const stopped = new Set<string>();
  for (const stop of result.stop) {
    stopped.add(stop.allocationId);
    if (adopted.delete(stop.allocationId)) continue;
    plan.stop.push(stop);
  }
  plan.insert.push(...adopted.values());
  const placedBy = new Map<string, RolloutAllocation[]>();
  for (const place of result.place) {
    const row: NewAllocation = { id: input.newId(), serviceId: place.serviceId, nodeId: place.nodeId, releaseId: place.releaseId || null, cause: place.cause, ...(place.replaces ? { replaces: place.replaces } : {}) };
    plan.insert.push(row);
    if (row.releaseId !== null) plan.moved.push(row.id);
    const list = placedBy.get(row.serviceId) ?? [];
    list.push({ id: row.id, nodeId: row.nodeId, releaseId: row.releaseId, createdAt: input.now, status: null, statusAt: null });
    placedBy.set(row.serviceId, list);
  }

  // 2b. Evacuations.
  if (evacuating.size > 0) evacuate(input, plan, { specs, nodeViews, evacuating, leaving, stopped, forSchedule, placedBy, newId: input.newId });

  // 3. Rollouts.
  for (const [index, service] of input.services.entries()) {
    const { target, running } = releases.get(service.id)!;
    if (!target) continue;
    const spec = specs[index]!;
    const runs: RolloutAllocation[] = [
      ...(allocationsBy.get(service.id) ?? []).filter((a) => a.desired === 'run' && !stopped.has(a.id) && !leaving.has(a.id)),
      ...[...adopted.values()].filter((a) => a.serviceId === service.id).map((a) => ({ id: a.id, nodeId: a.nodeId, releaseId: a.releaseId, createdAt: input.now, status: null, statusAt: null })),
      ...(placedBy.get(service.id) ?? []),
    ];
    stepRollout(plan, {
      service,
      spec,
      runs,
      target,
      previous: running && running.id !== target.id ? running.id : null,
      nodes: nodeById,
      now: input.now,
      progressDeadlineMs: input.progressDeadlineMs,
      movedAt: input.movedAt,
      progressAt: input.progressAt.get(target.id),
    });
  }

  // 4. Stopped allocations their node no longer has.
  for (const a of input.allocations) if (a.desired === 'stop' && a.status?.state === 'removed') plan.remove.push(a.id);

  const changed = new Set<string>();
  for (const row of plan.insert) changed.add(row.nodeId);
  for (const stop of plan.stop) changed.add(stop.nodeId);
  const nodeOfAllocation = new Map<string, string>();
  for (const a of input.allocations) nodeOfAllocation.set(a.id, a.nodeId);
  for (const row of plan.insert) nodeOfAllocation.set(row.id, row.nodeId);
  for (const move of plan.moves) for (const id of move.allocationIds) changed.add(nodeOfAllocation.get(id)!);
  plan.changedNodes = [...changed].sort(compareText);
  return plan;
}

