import { clusterProof, nodeHealth, type ClusterProof } from '../node-health/node-health.js';
import type { ClusterView } from '../sessions/remote-report.js';
import type { SessionRegistry } from '../sessions/registry.js';
import { containerReady } from '../node-health/container-verdict.js';
import { oomNote, unhealthyNote } from './container-notes.js';
import { replicaMove } from './replica-moves.js';
import { managedByAllocations as managedHome } from '../db/where-services-run.js';
import type { PendingReplicas } from '../db/json-columns.js';
import type { AllocationInput, HomeStatus, LeftOutLookup, PlacedReplica, ReplicaState, ReplicaStatus, ServiceState, ServiceStatus, StatusInput } from './status-types.js';

export type { LeftOutLookup, ReplicaState, ReplicaStatus } from './status-types.js';

// Status per replica (issue 36): a service whose home node speaks
// `workload.allocations` is "managed by allocations", and its status is read
// from its allocations, one entry each, as their nodes last reported them in
// allocations.status (the allocation rows every panel reads). A replica on a
// node no live session proves is `unknown`, whatever its row says; a status
// recorded by an earlier session of a live node is `unknown` too until the
// current session reports (no status is older than the session that proves
// it). runningReplicas counts the run allocations `running` and healthy (or
// without a check) on a live node. Other services answer as before, with
// `allocations: []`.




/** Managed by allocations (db/where-services-run.ts): no home node yet, or one that speaks workload.allocations. */
export const managedByAllocations = (service: StatusInput): boolean => managedHome(service.node);

/** One entry per replica the scheduler could not place: no allocation, no node, `pending` with the reason. */
export function pendingEntries(waiting: PendingReplicas | null): ReplicaStatus[] {
  return Array.from({ length: waiting?.count ?? 0 }, () => ({
    allocationId: null,
    node: null,
    desired: 'run' as const,
    state: 'pending' as const,
    deploymentId: null,
    runningDeploymentId: null,
    health: null,
    code: waiting!.code,
    reason: waiting!.message,
    evidence: null,
    movedFrom: null,
  }));
}

/** A managed service's status with its replicas that wait for a node after those placed. */
export function withPending(status: Omit<ServiceStatus, 'routes'>, waiting: PendingReplicas | null): Omit<ServiceStatus, 'routes'> {
  if (!waiting) return status;
  return { ...status, reason: `${status.reason}; ${waiting.count} pending: ${waiting.code}: ${waiting.message}`, allocations: [...status.allocations, ...pendingEntries(waiting)] };
}

/** A service without a home node: nothing runs anywhere (it has no allocation), every wanted replica pending. */
export function homeless(service: StatusInput, waiting: PendingReplicas | null): Omit<ServiceStatus, 'routes'> {
  const reason = waiting ? `0/${service.replicas} running: no node yet, ${waiting.count} pending: ${waiting.code}: ${waiting.message}` : 'no node yet; no replica wanted';
  return {
    serviceId: service.id,
    name: service.name,
    teamId: service.teamId,
    node: null,
    state: service.replicas === 0 ? 'stopped' : 'pending',
    desiredReplicas: service.replicas,
    runningReplicas: 0,
    reason,
    containers: [],
    evidence: null,
    unknownReplicas: 0,
    allocations: pendingEntries(waiting),
  };
}

/** An unmanaged service: today's answer; all its replicas unknown while the service is. */
export function unmanaged(home: HomeStatus): Omit<ServiceStatus, 'routes'> {
  return { ...home, unknownReplicas: home.state === 'unknown' ? home.desiredReplicas : 0, allocations: [] };
}

interface Reported {
  state?: string;
  runningDeploymentId?: string | null;
  health?: string;
  code?: string | null;
  reason?: string | null;
}

/** The service's status from its allocations; the home node's containers and evidence stay as they are. */
export function withAllocations(
  home: HomeStatus,
  service: StatusInput,
  registry: Pick<SessionRegistry, 'get' | 'lastTeardown'>,
  now: number,
  cluster?: ClusterView | ClusterProof,
  leftOut?: LeftOutLookup,
): Omit<ServiceStatus, 'routes'> {
  const proof: ClusterProof | undefined = cluster && ('elsewhere' in cluster ? cluster : clusterProof(cluster));
  // The home node's live report (its heartbeat, on the session that proves it) is the freshest word on the
  // containers there: a replica it names reads the container's state and health from it, so the count never
  // lags the containers[] shown beside it, and a replica whose rollout is under way counts while the
  // container it names still serves. A home node whose runtime is unavailable makes its replicas unknown.
  const homeLive = home.evidence !== null && home.state !== 'unknown';
  const homeRuntimeDown = home.evidence !== null && home.state === 'unknown';
  const homeContainers = new Map(homeLive ? home.containers.map((c) => [c.containerId, c]) : []);
  const allocations = (service.allocations ?? []).map((a) => {
    const r = replica(a, registry, now, proof, leftOut);
    if (a.nodeId !== home.node.id || r.state === 'unknown' || r.state === 'removed') return r;
    if (homeRuntimeDown) return { ...r, state: 'unknown' as const, code: 'RUNTIME_UNAVAILABLE', reason: home.reason };
    const c = containerIdOf(a) !== null ? homeContainers.get(containerIdOf(a)!) : undefined;
    return c ? { ...r, health: c.state === 'running' ? c.health : r.health } : r;
  });
  const serving = (a: PlacedReplica, input: AllocationInput | undefined): boolean => {
    const onHome = homeLive && input !== undefined && input.nodeId === home.node.id;
    const c = onHome ? homeContainers.get(containerIdOf(input) ?? '') : undefined;
    if (c) return a.state !== 'unknown' && a.state !== 'removed' && a.state !== 'draining' && containerReady(c);
    // A container the home node's live heartbeat does not show yet is not counted: the count never runs ahead of the
    // containers[] beside it (an allocations.status can arrive up to a heartbeat before the heartbeat naming it).
    if (onHome && containerIdOf(input) !== null) return false;
    return a.state === 'running' && (a.health === 'healthy' || a.health === 'none');
  };
  const inputs = new Map((service.allocations ?? []).map((a) => [a.id, a]));
  const run = allocations.filter((a) => a.desired === 'run');
  const up = new Set(run.filter((a) => serving(a, inputs.get(a.allocationId))).map((a) => a.allocationId));
  const running = up.size;
  const unknownReplicas = run.filter((a) => a.state === 'unknown').length;
  const desired = service.replicas;
  let state: ServiceState;
  if (desired === 0) state = running === 0 ? 'stopped' : 'degraded';
  else if (running >= desired) state = 'running';
  else if (running === 0 && run.length > 0 && unknownReplicas === run.length) state = 'unknown';
  else state = running === 0 ? 'down' : 'degraded';
  const notes = run
    .filter((a) => !up.has(a.allocationId) && !(homeRuntimeDown && a.code === 'RUNTIME_UNAVAILABLE'))
    .map((a) => `${a.node.name}: ${a.state}${a.health === 'unhealthy' ? ' (unhealthy)' : ''}${a.code ? ` ${a.code}` : ''}${a.reason ? ` (${a.reason})` : ''}`);
  const counted = `${running}/${desired} running across ${new Set(run.map((a) => a.node.id)).size} node(s) by their allocations${unknownReplicas ? `, ${unknownReplicas} unknown` : ''}${notes.length ? `; ${notes.join('; ')}` : ''}`;
  // The home node's own words first when its runtime is gone; its containers' notes (OOM kills with their restart
  // counts, failing checks with their probe) last, as the single-node answer gives them.
  const mine = homeLive ? home.containers.filter((c) => c.serviceId === service.id) : [];
  const reason = homeRuntimeDown && run.some((a) => a.code === 'RUNTIME_UNAVAILABLE') ? `${home.reason}; ${counted}` : `${counted}${oomNote(mine)}${unhealthyNote(mine)}`;
  // Unknown is not zero: no count is claimed that no live session proves (as on the single-node path).
  return { ...home, state, runningReplicas: state === 'unknown' ? null : running, reason, unknownReplicas, allocations };
}

/** The container the allocation's node last named for it (allocations.status containerId), if any. */
function containerIdOf(a: AllocationInput): string | null {
  const id = (a.status as { containerId?: unknown } | null | undefined)?.containerId;
  return typeof id === 'string' ? id : null;
}

function replica(a: AllocationInput, registry: Pick<SessionRegistry, 'get' | 'lastTeardown'>, now: number, proof: ClusterProof | undefined, leftOut?: LeftOutLookup): PlacedReplica {
  const reported = (a.status ?? null) as Reported | null;
  const base = {
    allocationId: a.id,
    node: { id: a.nodeId, name: a.node.name },
    desired: (a.desired === 'stop' ? 'stop' : 'run') as 'run' | 'stop',
    deploymentId: a.releaseId,
    evidence: a.statusSession && a.statusAt ? { sessionId: a.statusSession, statusAgeMs: Math.max(0, now - a.statusAt.getTime()) } : null,
    movedFrom: replicaMove(a),
  };
  const recorded = {
    runningDeploymentId: reported?.runningDeploymentId ?? null,
    health: reported?.health ?? null,
    code: reported?.code ?? null,
    reason: reported?.reason ?? null,
  };
  // Removed is final: the agent no longer has it, whatever became of the node since.
  if (reported?.state === 'removed') return { ...base, ...recorded, state: 'removed' };
  const health = nodeHealth(
    {
      id: a.nodeId,
      name: a.node.name,
      decommissioned: false,
      lastSeenAt: null,
      unreachableSince: a.node.unreachableSince?.getTime() ?? null,
      lastTeardownAt: null,
      lastTeardownReason: a.node.lastTeardownReason,
      lastCloseCode: null,
    },
    { registry, ...(proof ? { cluster: proof } : {}) },
  );
  const sessionId = health.local?.id ?? health.remote?.sessionId ?? null;
  if (sessionId === null) {
    const why = health.leaseLost
      ? 'this panel does not hold its lease: the node cannot be proved from here'
      : health.unreachableSince !== null
        ? `node ${a.node.name} unreachable since ${new Date(health.unreachableSince).toISOString()}`
        : `node ${a.node.name} has no live session`;
    return { ...base, ...recorded, state: 'unknown', code: 'NODE_UNREACHABLE', reason: why };
  }
  if (!reported) {
    const out = leftOut?.(a.nodeId).get(a.id);
    if (out) return { ...base, ...recorded, state: 'pending', code: out.reason, reason: out.missing?.length ? `needs ${out.missing.join(', ')}` : null };
    return { ...base, ...recorded, state: 'pending', reason: 'not reported by its node yet' };
  }
  if (a.statusSession !== sessionId) {
    return { ...base, ...recorded, state: 'unknown', code: 'STATUS_FROM_EARLIER_SESSION', reason: `last reported by session ${a.statusSession}; session ${sessionId} has not reported it yet` };
  }
  return { ...base, ...recorded, state: (reported.state ?? 'unknown') as ReplicaState };
}
