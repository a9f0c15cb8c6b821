import { compareText } from './order.js';
import { effectivePlacement, nodeViewOf, type ManagedServiceFacts, type NodeFacts } from './managed.js';
import { planEvacuation, type EvacuationMove } from './evacuation-plan.js';
import { decideRollout, runsHealthy, type RolloutAllocation, type TargetRelease } from './rollout-progress.js';
import { rolloutLimits, rolloutOptionsOf, type RolloutOptions } from './rollout-plan.js';
import { holdFenced, paceReplacements } from './failover-policy.js';
import { schedule, wantedReplicas } from './schedule.js';
import { homesOf, pendingWrites, type HomeWrite, type PendingWrite } from './homes.js';
import type { Allocation, NodeState, PendingChange, RefusedChange, ServiceSpec, StopChange } from './types.js';

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
// 2b. Evacuations, one move at a time per node: a leaving replica is stopped
//    (drained) once the service has as many healthy replicas without it as it
//    wants; with none under way, planEvacuation's next move places a new one.
// 3. Each service with a target release (its newest deployment that is not
//    final, else its running one) rolls out step by step (rollout-progress.ts).
// 4. Allocations marked stop that their node no longer has are deleted.
// 5. Older deployments still in flight are superseded by the target.

export interface ServiceRow extends ManagedServiceFacts {
  id: string;
  /** Null: no home yet (its replicas pending until one is placed). */
  homeNodeId: string | null;
  /** services.pending as stored (homes.ts compares before it writes). */
  pending?: unknown;
  replicas: number;
  /** A writable volume: one replica that never moves. */
  stateful: boolean;
  /** When the service was created (epoch ms): lost replicas are re-placed oldest services first. */
  createdAt?: number;
  /** failover.fence: its lost replicas wait for their agent's fence (failover-policy.ts holdFenced); rollouts never overlap. */
  fenced?: boolean;
  /** The service's `rollout` (null: each its default; absent: all of them). */
  rollout?: { maxSurge: number | null; maxUnavailable: number | null; progressDeadlineSeconds: number | null };
}

export interface DeploymentRow {
  id: string;
  serviceId: string;
  status: 'pending' | 'delivered' | 'running';
  createdAt: number;
  dispatchedAt: number | null;
  reason: string | null;
}

export interface AllocationRow extends RolloutAllocation {
  serviceId: string;
  desired: 'run' | 'stop';
}

export interface EvaluationInput {
  services: readonly ServiceRow[];
  /** The managed services' deployments in flight or running. */
  deployments: readonly DeploymentRow[];
  nodes: readonly NodeFacts[];
  /** Every allocation of the managed services. */
  allocations: readonly AllocationRow[];
  now: number;
  /** The panel's TETHER_PROGRESS_DEADLINE_SECONDS: a service's rollout.progressDeadlineSeconds replaces it. */
  progressDeadlineMs: number;
  movedAt: ReadonlyMap<string, number>;
  progressAt: ReadonlyMap<string, number>;
  newId: () => string;
  /**
   * Failover (issue 38, failover-policy.ts): each node's state by failoverView (absent: live or unreachable from
   * the session alone, nothing is ever lost), and how many lost replicas may be re-placed now (paceReplacements).
   */
  failover?: { states: ReadonlyMap<string, NodeState>; budget: number; fenceHeld?: ReadonlySet<string> };
}

export type AllocationCause = 'adopted' | 'scale-up' | 'node-lost' | 'placement-changed' | 'evacuate';

export interface NewAllocation {
  id: string;
  serviceId: string;
  nodeId: string;
  releaseId: string | null;
  cause: AllocationCause;
  /** The allocation it takes the place of (a lost node's, an evacuated one's). */
  replaces?: string;
}

export interface ReleaseMove {
  serviceId: string;
  releaseId: string | null;
  allocationIds: string[];
}

export type DeploymentWrite =
  | { kind: 'progress'; id: string; reason: string }
  | { kind: 'running'; id: string; serviceId: string; reason: string; imageRef: string | null }
  | { kind: 'failed'; id: string; reason: string }
  | { kind: 'superseded'; id: string; reason: string };

export interface EvaluationPlan {
  insert: NewAllocation[];
  stop: StopChange[];
  /** Allocations marked stop that their node reported removed: their rows go. */
  remove: string[];
  moves: ReleaseMove[];
  deployments: DeploymentWrite[];
  pending: PendingChange[];
  refused: RefusedChange[];
  /** Nodes whose set of run allocations changed: their sessions get a new allocations frame. */
  changedNodes: string[];
  /** Each evacuating node: whether a move is under way, and what was found left on it. */
  evacuations: EvacuationProgress[];
  /** Allocations placed on or moved to a target release now (their moved-at time is now). */
  moved: string[];
  /** Re-placements of lost replicas left for a later evaluation by the pace (each keeps its lost allocation). */
  deferred: number;
  /** Rollouts that made a step now. */
  progressed: string[];
  /** Services without a home that get one now (their first replica's node). */
  homes: HomeWrite[];
  /** services.pending that changed. */
  pendingWrites: PendingWrite[];
}

export interface EvacuationProgress {
  nodeId: string;
  /** A replacement placed, the old replica waiting for it to be healthy (or stopped now). */
  moving: number;
  /** Run allocations still on the node that no move is planned for (refused or pending), and none moving: done. */
  left: number;
}

export function isEmptyPlan(plan: EvaluationPlan): boolean {
  return plan.insert.length + plan.stop.length + plan.remove.length + plan.moves.length + plan.deployments.length + plan.homes.length + plan.pendingWrites.length === 0;
}

/** The service's target release and the one it runs: deployments newest first. */
export function releasesOf(deployments: readonly DeploymentRow[]): { target: DeploymentRow | undefined; running: DeploymentRow | undefined; older: DeploymentRow[] } {
  const sorted = [...deployments].sort((a, b) => b.createdAt - a.createdAt || compareText(b.id, a.id));
  const target = sorted[0];
  const running = sorted.find((d) => d.status === 'running');
  const older = sorted.slice(1).filter((d) => d.status !== 'running');
  return { target, running, older };
}

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
    const targetRelease: TargetRelease = { id: target.id, status: target.status, createdAt: target.createdAt, dispatchedAt: target.dispatchedAt, reason: target.reason };
    const decision = decideRollout({
      service: spec,
      allocations: runs,
      wanted: wantedReplicas(spec),
      target: targetRelease,
      previous: running && running.id !== target.id ? running.id : null,
      nodes: nodeById,
      now: input.now,
      progressDeadlineMs: service.rollout?.progressDeadlineSeconds ? service.rollout.progressDeadlineSeconds * 1000 : input.progressDeadlineMs,
      movedAt: input.movedAt,
      progressAt: input.progressAt.get(target.id),
      options: rolloutOptions(service, spec),
    });
    switch (decision.kind) {
      case 'step':
        plan.moves.push({ serviceId: service.id, releaseId: target.id, allocationIds: decision.allocationIds });
        plan.moved.push(...decision.allocationIds);
        plan.progressed.push(target.id);
        if (decision.reason !== target.reason) plan.deployments.push({ kind: 'progress', id: target.id, reason: decision.reason });
        break;
      case 'wait':
        if (decision.reason !== target.reason) plan.deployments.push({ kind: 'progress', id: target.id, reason: decision.reason });
        break;
      case 'running':
        plan.deployments.push({ kind: 'running', id: target.id, serviceId: service.id, reason: decision.reason, imageRef: decision.imageRef });
        break;
      case 'failed':
        plan.deployments.push({ kind: 'failed', id: target.id, reason: decision.reason });
        if (decision.revert.allocationIds.length > 0) plan.moves.push({ serviceId: service.id, releaseId: decision.revert.to, allocationIds: decision.revert.allocationIds });
        break;
      case 'none':
        break;
    }
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

interface EvacuationContext {
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
function evacuate(input: EvaluationInput, plan: EvaluationPlan, ctx: EvacuationContext): void {
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

/**
 * The limits a service's rollout runs with. The API refuses a `rollout` its volumes or fence cannot take
 * (domain/service-fields.ts checkRollout); a row that slipped past (written by hand) rolls out with the defaults
 * rather than stop every rollout of the evaluation.
 */
function rolloutOptions(service: ServiceRow, spec: ServiceSpec): RolloutOptions {
  if (!service.rollout) return {};
  const options = rolloutOptionsOf(service.rollout);
  try {
    rolloutLimits(spec, options);
    return options;
  } catch {
    return {};
  }
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}
