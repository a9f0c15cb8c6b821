import { compareText } from './order.js';
import type { ManagedServiceFacts, NodeFacts } from './managed.js';
import type { RolloutAllocation } from './rollout-progress.js';
import type { HomeWrite, PendingWrite } from './homes.js';
import type { NodeState, PendingChange, RefusedChange, StopChange } from './types.js';

// What one evaluation of the scheduler reads and what it decides
// (evaluation.ts), as plain data: the rows the loop reads
// (cluster/scheduler-reads.ts) and the plan it writes
// (cluster/scheduler-writes.ts).

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

export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}
