// The scheduler's vocabulary (issue 36). An allocation is one replica of one
// release placed on one node, in Nomad's sense; everything here is plain data
// so the scheduler stays a pure function the callers feed from the database.

/** What a service asks of the scheduler. */
export interface ServiceSpec {
  id: string;
  /** The release new replicas run (a deployment id or image ref; opaque here). */
  releaseId: string;
  /** 0–100; 0 means stopped. */
  replicas: number;
  placement: Placement;
  /** A writable volume pins the service to one node and one replica. */
  stateful: boolean;
  /** failover.fence (issue 38): never two copies at once, so rollouts stop the old replica first (maxSurge 0). */
  fenced?: boolean;
}

export interface Placement {
  /** Node names the service may run on; empty or absent means any. */
  nodes?: readonly string[];
  /** Labels a node must carry, every key with exactly this value. */
  labels?: Readonly<Record<string, string>>;
}

/**
 * live: a session carried traffic within the deadline. unreachable: no live
 * session, but not yet given up (its allocations stay; failover decides when).
 * lost: given up; its allocations are replaced elsewhere.
 */
export type NodeState = 'live' | 'unreachable' | 'lost';

export interface NodeView {
  id: string;
  name: string;
  state: NodeState;
  /** Keeps its allocations, gets no new ones. */
  cordoned: boolean;
  decommissioned: boolean;
  labels: Readonly<Record<string, string>>;
  /** Being evacuated (cordoned too): its allocations move away one at a time (evacuation-plan.ts). */
  evacuating?: boolean;
}

export interface Allocation {
  id: string;
  serviceId: string;
  nodeId: string;
  releaseId: string;
  /** Creation order: larger is newer (epoch milliseconds or a sequence). */
  createdAt: number;
  /** stop: marked to stop after its drain; no longer counts as a replica. */
  desired: 'run' | 'stop';
}

/** Why a replica has no node. Codes the API shows on a pending replica. */
export type PendingReason = 'NO_NODE_AVAILABLE' | 'NO_NODE_MATCHES_LABELS';

/** Why an allocation that should move does not. */
export type RefusalReason = 'STATEFUL_SERVICE_PINNED' | 'SERVICE_PINNED_TO_NODE';

export type PlaceCause = 'scale-up' | 'node-lost' | 'placement-changed' | 'evacuate';
export type StopCause = 'scale-down' | 'service-stopped' | 'node-lost' | 'placement-changed' | 'evacuate';

/**
 * A new allocation. With `replaces`, the old allocation is stopped (drained)
 * only once this one is healthy, unless a stop for it is in the same changes
 * (its node is lost: nothing is left to drain).
 */
export interface PlaceChange {
  kind: 'place';
  serviceId: string;
  nodeId: string;
  releaseId: string;
  cause: PlaceCause;
  replaces?: string;
}

/** Mark an allocation to stop; `drain` when its node can still drain it. */
export interface StopChange {
  kind: 'stop';
  allocationId: string;
  serviceId: string;
  nodeId: string;
  drain: boolean;
  cause: StopCause;
}

export interface PendingChange {
  kind: 'pending';
  serviceId: string;
  count: number;
  reason: PendingReason;
}

export interface RefusedChange {
  kind: 'refused';
  serviceId: string;
  allocationId: string;
  reason: RefusalReason;
  message: string;
}

export type Change = PlaceChange | StopChange | PendingChange | RefusedChange;

export interface ScheduleResult {
  place: PlaceChange[];
  stop: StopChange[];
  pending: PendingChange[];
  refused: RefusedChange[];
}
