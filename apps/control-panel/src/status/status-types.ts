import type { ContainerState } from '@tether/protocol';
import type { RouteHealth, routeCertificate } from './route-health.js';

// The shapes of a service's status, shared by service-status.ts (the home node's answer) and replica-status.ts
// (status per replica), which each build part of it.

/** pending: no replica runs and some wait for an eligible node (a service without a home node). */
export type ServiceState = 'running' | 'degraded' | 'down' | 'stopped' | 'unknown' | 'pending';

export interface StatusInput {
  id: string;
  name: string;
  teamId: string;
  replicas: number;
  /** Its home node; null: none yet (no node was eligible: its replicas wait, managed by the scheduler). */
  node: { id: string; name: string; unreachableSince: Date | null; lastTeardownReason: string | null; capabilities?: string[] | null } | null;
  /** services.pending (replicas the scheduler could not place, and why); absent: not read. */
  pending?: unknown;
  /** The service's routes; absent: the status carries none. */
  routes?: { id: string; domain: string; pathPrefix: string | null }[];
  /** Its allocations (run and stop), read when the home node speaks workload.allocations; absent: none read. */
  allocations?: AllocationInput[];
}

/** One allocation row as status reads it (STATUS_SERVICE_SELECT). */
export interface AllocationInput {
  id: string;
  nodeId: string;
  releaseId: string | null;
  desired: string;
  status: unknown;
  statusAt: Date | null;
  statusSession: string | null;
  node: { name: string; unreachableSince: Date | null; lastTeardownReason: string | null };
  /** When it was placed, and the lost replica it replaced (`allocations.moved_from`, cluster/failover-record.ts); absent: not read. */
  createdAt?: Date;
  movedFrom?: unknown;
}

/** One of a service's routes with its health and certificate, as GET /v1/routes/:id answers them. */
export interface ServiceRoute {
  id: string;
  domain: string;
  pathPrefix: string | null;
  health: RouteHealth;
  certificate: ReturnType<typeof routeCertificate>;
}

export interface ServiceStatus {
  serviceId: string;
  name: string;
  teamId: string;
  /** Its home node; null while it has none (every replica pending). */
  node: { id: string; name: string } | null;
  state: ServiceState;
  desiredReplicas: number;
  runningReplicas: number | null;
  reason: string;
  containers: ContainerState[];
  evidence: { sessionId: string; lastFrameAgeMs: number; reportAgeMs: number; panelId?: string; source?: 'session' | 'owner' | 'report-row' } | null;
  /** Present when the input named the service's routes. */
  routes?: ServiceRoute[];
  /** Replicas whose node no live session proves (allocations on such nodes; an unmanaged service's all, while unknown). */
  unknownReplicas: number;
  /** One per allocation (run and stop) of a service managed by allocations; empty otherwise. */
  allocations: ReplicaStatus[];
}

/** The service's state as its home node's session reports it (today's answer, before allocations). */
export type HomeStatus = Omit<ServiceStatus, 'unknownReplicas' | 'allocations' | 'node'> & { node: { id: string; name: string } };

/** What an allocation's node last reported, or what the panel knows instead. */
export type ReplicaState = 'pending' | 'starting' | 'running' | 'failed' | 'draining' | 'removed' | 'unknown';

export interface ReplicaStatus {
  /** Null: a replica the scheduler could not place (state pending, code NO_NODE_AVAILABLE or NO_NODE_MATCHES_LABELS). */
  allocationId: string | null;
  /** Null: not placed on any node (pending). */
  node: { id: string; name: string } | null;
  /** run: one of the service's replicas; stop: being drained and removed (not counted). */
  desired: 'run' | 'stop';
  state: ReplicaState;
  /** The release (deployment id) the allocation must run; null: the service has none yet. */
  deploymentId: string | null;
  /** The release its serving container runs (null: none serves, or not reported). */
  runningDeploymentId: string | null;
  health: string | null;
  code: string | null;
  reason: string | null;
  /** The session whose allocations.status recorded the state, and how long ago it was recorded; null: never reported. */
  evidence: { sessionId: string; statusAgeMs: number } | null;
  /** Placed by failover in place of a lost node's replica: where from, why, when (status/replica-moves.ts); null otherwise. */
  movedFrom: ReplicaMove | null;
}

/** A replica placed on a node (an allocation). */
export type PlacedReplica = ReplicaStatus & { allocationId: string; node: { id: string; name: string } };

/** A replica failover moved off a lost node, from the facts the scheduler recorded when it placed the replacement. */
export interface ReplicaMove {
  node: { id: string; name: string };
  /** Since when the node had no live session (ISO); null: never recorded. */
  unreachableSince: string | null;
  /** Why its last session was torn down; null: not recorded. */
  teardownReason: string | null;
  /** When the replacement was placed (ISO). */
  at: string;
  /** "moved from node-a (unreachable since …, torn down for …) to node-c at …" */
  message: string;
}

/** What the owning panel's last `allocations` set left out, per node (dispatch/allocation-sync.ts). */
export type LeftOutLookup = (nodeId: string) => ReadonlyMap<string, { reason: string; missing?: readonly string[] }>;
