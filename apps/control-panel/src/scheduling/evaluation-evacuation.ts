import { compareText } from './order.js';
import { effectivePlacement, nodeViewOf } from './managed.js';
import { planEvacuation, type EvacuationMove } from './evacuation-plan.js';
import { runsHealthy, type RolloutAllocation } from './rollout-progress.js';
import { wantedReplicas } from './schedule.js';
import { groupBy, releasesOf, type AllocationRow, type EvaluationInput, type EvaluationPlan, type NewAllocation } from './evaluation-plan.js';
import type { Allocation, PendingChange, RefusedChange, ServiceSpec } from './types.js';

// Evacuations in an evaluation (evaluation.ts, step 2b), and the answer of
// POST /v1/nodes/:id/evacuate from the same rows (previewEvacuation).

export interface EvacuationPreview {
  moves: EvacuationMove[];
  refused: RefusedChange[];
  pending: PendingChange[];
}

/**
 * What an evacuation of `nodeId` would move and what refuses, from the same rows an evaluation reads (the answer
 * of POST /v1/nodes/:id/evacuate). The scheduler makes the moves one at a time; each `to` is where the next
 * would go with the loads of now.
 */
export function previewEvacuation(nodeId: string, input: Pick<EvaluationInput, 'services' | 'deployments' | 'nodes' | 'allocations'>): EvacuationPreview {
  const deploymentsBy = groupBy(input.deployments, (d) => d.serviceId);
  const specs: ServiceSpec[] = input.services.map((service) => ({
    id: service.id,
    releaseId: releasesOf(deploymentsBy.get(service.id) ?? []).target?.id ?? '',
    replicas: service.replicas,
    placement: effectivePlacement(service),
    stateful: service.stateful,
  }));
  const allocations: Allocation[] = input.allocations
    .filter((a) => a.desired === 'run')
    .map((a) => ({ id: a.id, serviceId: a.serviceId, nodeId: a.nodeId, releaseId: a.releaseId ?? '', createdAt: a.createdAt, desired: 'run' }));
  const { moves, refused, pending } = planEvacuation(nodeId, specs, input.nodes.map(nodeViewOf), allocations);
  return { moves, refused, pending };
}

export interface EvacuationContext {
  specs: readonly ServiceSpec[];
  nodeViews: readonly ReturnType<typeof nodeViewOf>[];
  evacuating: ReadonlySet<string>;
  leaving: Map<string, AllocationRow>;
  stopped: Set<string>;
  forSchedule: readonly Allocation[];
  placedBy: Map<string, RolloutAllocation[]>;
  newId: () => string;
}

/**
 * Step 2b: each leaving replica stops (drained while its node is live) once its service has as many healthy
 * replicas without it as it wants; an evacuating node with no move under way gets its next one placed.
 */
export function evacuate(input: EvaluationInput, plan: EvaluationPlan, ctx: EvacuationContext): void {
  const { specs, nodeViews, evacuating, leaving, stopped, placedBy } = ctx;
  const specById = new Map(specs.map((s) => [s.id, s]));
  const nodeById = new Map(nodeViews.map((n) => [n.id, n]));
  const moving = new Map<string, number>();
  for (const a of leaving.values()) {
    moving.set(a.nodeId, (moving.get(a.nodeId) ?? 0) + 1);
    const spec = specById.get(a.serviceId);
    if (!spec) continue;
    const wanted = wantedReplicas(spec);
    let healthy = 0;
    for (const o of input.allocations) {
      if (o.serviceId !== a.serviceId || o.desired !== 'run' || stopped.has(o.id) || leaving.has(o.id)) continue;
      if (o.releaseId !== null && runsHealthy(o.status, o.releaseId)) healthy++;
    }
    // No release: nothing runs anywhere, nothing to wait for.
    if (healthy >= wanted || spec.releaseId === '') {
      plan.stop.push({ kind: 'stop', allocationId: a.id, serviceId: a.serviceId, nodeId: a.nodeId, drain: nodeById.get(a.nodeId)?.state === 'live', cause: 'evacuate' });
      stopped.add(a.id);
    }
  }
  // What runs after this evaluation, as planEvacuation reads it.
  const current: Allocation[] = ctx.forSchedule.filter((a) => !stopped.has(a.id));
  for (const a of leaving.values()) if (!stopped.has(a.id)) current.push({ id: a.id, serviceId: a.serviceId, nodeId: a.nodeId, releaseId: a.releaseId ?? '', createdAt: a.createdAt, desired: 'run' });
  for (const [serviceId, list] of placedBy) for (const p of list) current.push({ id: p.id, serviceId, nodeId: p.nodeId, releaseId: p.releaseId ?? '', createdAt: p.createdAt, desired: 'run' });
  for (const nodeId of [...evacuating].sort(compareText)) {
    const found = planEvacuation(nodeId, specs, nodeViews, current);
    plan.refused.push(...found.refused);
    plan.pending.push(...found.pending);
    let under = moving.get(nodeId) ?? 0;
    // One move at a time: the next only once the one under way has stopped its old replica.
    const next = under > 0 ? undefined : found.moves.find((m) => !placedBy.has(m.serviceId) && !leaving.has(m.allocationId));
    if (next) {
      const row: NewAllocation = { id: ctx.newId(), serviceId: next.serviceId, nodeId: next.to, releaseId: next.releaseId || null, cause: 'evacuate', replaces: next.allocationId };
      plan.insert.push(row);
      if (row.releaseId !== null) plan.moved.push(row.id);
      const old = input.allocations.find((a) => a.id === next.allocationId);
      // The old replica is leaving from now on: rollouts count the new one instead.
      if (old) leaving.set(old.id, old);
      const list = placedBy.get(next.serviceId) ?? [];
      list.push({ id: row.id, nodeId: row.nodeId, releaseId: row.releaseId, createdAt: input.now, status: null, statusAt: null });
      placedBy.set(next.serviceId, list);
      under++;
    }
    plan.evacuations.push({ nodeId, moving: under, left: found.refused.length + found.pending.reduce((n, p) => n + p.count, 0) });
  }
}
