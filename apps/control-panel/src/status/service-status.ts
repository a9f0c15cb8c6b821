import type { ContainerState } from '@tether/protocol';
import { upReplicas } from '../node-health/container-verdict.js';
import { clusterProof, nodeHealth, type ClusterProof } from '../node-health/node-health.js';
import type { ClusterView, RemoteReport } from '../sessions/remote-report.js';
import type { SessionRegistry } from '../sessions/registry.js';
import { oomNote, unhealthyNote } from './container-notes.js';
import { liveRoutingOf } from './route-health.js';
import { routeServing } from './route-serving.js';
import type { ServingNodeRow } from '../routing/serving-nodes.js';
import { homeless, managedByAllocations, unmanaged, withAllocations, withPending } from './replica-status.js';
import { waitingReplicas } from '../db/json-columns.js';
import type { HomeStatus, LeftOutLookup, ServiceState, ServiceStatus, StatusInput } from './status-types.js';

export type { AllocationInput, HomeStatus, ServiceRoute, ServiceState, ServiceStatus, StatusInput } from './status-types.js';

// A service's status: a presenter of its node's health (node-health/
// node-health.ts says which live session, if any, proves the node) and of
// that session's report. Every answer carries its evidence (which session,
// how old its last frame and the report are); a node without a live session
// makes its services `unknown`, never `running`. Its routes' health and
// certificates are read from route-health.ts, as GET /v1/routes reads them.




/** What a Prisma read of a service selects of its routes for its status (ordered as GET /v1/routes lists them). */
const STATUS_ROUTES = {
  select: { id: true, domain: true, pathPrefix: true },
  orderBy: [{ domain: 'asc' as const }, { pathPrefix: 'asc' as const }],
};

/** What a Prisma read of a service selects of its allocations (run and stop) for status per replica. */
const STATUS_ALLOCATIONS = {
  select: {
    id: true,
    nodeId: true,
    releaseId: true,
    desired: true,
    status: true,
    statusAt: true,
    statusSession: true,
    createdAt: true,
    movedFrom: true,
    node: { select: { name: true, unreachableSince: true, lastTeardownReason: true } },
  },
  orderBy: [{ createdAt: 'asc' as const }, { id: 'asc' as const }],
};

/** What a Prisma read of a service selects for serviceStatus (GET /v1/status and the fleet page's node view). */
export const STATUS_SERVICE_SELECT = {
  id: true,
  name: true,
  teamId: true,
  replicas: true,
  pending: true,
  node: { select: { id: true, name: true, unreachableSince: true, lastTeardownReason: true, capabilities: true } },
  routes: STATUS_ROUTES,
  allocations: STATUS_ALLOCATIONS,
} as const;



export function serviceStatus(
  service: StatusInput,
  registry: Pick<SessionRegistry, 'get' | 'lastTeardown'>,
  now = Date.now(),
  cluster?: ClusterView | ClusterProof,
  leftOut?: LeftOutLookup,
): ServiceStatus {
  const waiting = waitingReplicas({ nodeId: service.node?.id ?? null, replicas: service.replicas, pending: service.pending });
  const status = service.node === null
    ? homeless(service, waiting)
    : managedByAllocations(service)
      ? withPending(withAllocations(replicaStatus({ ...service, node: service.node }, registry, now, cluster), service, registry, now, cluster, leftOut), waiting)
      : unmanaged(replicaStatus({ ...service, node: service.node }, registry, now, cluster));
  if (!service.routes) return status;
  // A managed service's routes are served by every node with a replica (issue 37): their health is read as GET
  // /v1/routes reads it (status/route-serving.ts). Entry points (the ingress label) are not in this read: that answer lists them.
  const serving = managedByAllocations(service) ? replicaNodes(service) : [];
  const live = (node: { id: string; name: string }) => liveRoutingOf(node, registry, cluster);
  const routes = service.routes.map((r) => {
    const { health, certificate } = routeServing(r, service.node, serving, live, now);
    return { id: r.id, domain: r.domain, pathPrefix: r.pathPrefix, health, certificate };
  });
  return { ...status, routes };
}


/** The nodes with a replica the scheduler wants (a `run` allocation with a release), by name, as serving-nodes.ts reads them. */
function replicaNodes(service: StatusInput): ServingNodeRow[] {
  const byNode = new Map<string, ServingNodeRow>();
  for (const a of service.allocations ?? []) {
    if (a.desired !== 'run' || a.releaseId === null) continue;
    byNode.set(a.nodeId, { service_id: service.id, node_id: a.nodeId, node_name: a.node.name, private_address: null, role: 'replica' });
  }
  return [...byNode.values()].sort((x, y) => (x.node_name < y.node_name ? -1 : x.node_name > y.node_name ? 1 : 0));
}

function replicaStatus(service: StatusInput & { node: NonNullable<StatusInput['node']> }, registry: Pick<SessionRegistry, 'get' | 'lastTeardown'>, now: number, cluster?: ClusterView | ClusterProof): HomeStatus {
  const base = {
    serviceId: service.id,
    name: service.name,
    teamId: service.teamId,
    node: { id: service.node.id, name: service.node.name },
    desiredReplicas: service.replicas,
  };
  const proof: ClusterProof | undefined = cluster && ('elsewhere' in cluster ? cluster : clusterProof(cluster));
  const health = nodeHealth(
    {
      id: service.node.id,
      name: service.node.name,
      decommissioned: false,
      lastSeenAt: null,
      unreachableSince: service.node.unreachableSince?.getTime() ?? null,
      lastTeardownAt: null,
      lastTeardownReason: service.node.lastTeardownReason,
      lastCloseCode: null,
    },
    { registry, ...(proof ? { cluster: proof } : {}) },
  );
  if (health.remote) return fromReport(base, service, health.remote, now);
  if (health.leaseLost) {
    const reason = `this panel (${proof!.panelId}) does not hold its lease on the database: node ${service.node.name} cannot be proved from here`;
    return { ...base, state: 'unknown', runningReplicas: null, reason, containers: [], evidence: null };
  }
  const session = health.local;
  if (!session || !session.report) {
    const since = health.unreachableSince;
    const why = health.teardown?.reason ?? service.node.lastTeardownReason;
    const reason = since !== null
      ? `node ${service.node.name} unreachable since ${new Date(since).toISOString()}${why ? ` (${why})` : ''}`
      : `node ${service.node.name} has not connected yet`;
    return { ...base, state: 'unknown', runningReplicas: null, reason, containers: [], evidence: null };
  }
  const report = session.report;
  const evidence = {
    sessionId: session.id,
    lastFrameAgeMs: now - session.lastFrameAt,
    reportAgeMs: now - report.at,
    ...(proof ? { panelId: proof.panelId, source: 'session' as const } : {}),
  };
  if (!report.runtime.available) {
    const reason = `container runtime unavailable on node ${service.node.name}: ${report.runtime.error ?? 'no detail'}`;
    return { ...base, state: 'unknown', runningReplicas: null, reason, containers: [], evidence };
  }
  return counted(base, service, report.containers, `session ${session.id}`, evidence);
}

type Base = Pick<HomeStatus, 'serviceId' | 'name' | 'teamId' | 'node' | 'desiredReplicas'>;

function counted(base: Base, service: StatusInput & { node: NonNullable<StatusInput['node']> }, all: ContainerState[], by: string, evidence: NonNullable<ServiceStatus['evidence']>): HomeStatus {
  const containers = all.filter((c) => c.serviceId === service.id);
  const running = upReplicas(containers, service.id);
  let state: ServiceState;
  if (service.replicas === 0) state = running === 0 ? 'stopped' : 'degraded';
  else if (running >= service.replicas) state = 'running';
  else state = running === 0 ? 'down' : 'degraded';
  const reason = `${running}/${service.replicas} running, reported by ${by}${oomNote(containers)}${unhealthyNote(containers)}`;
  return { ...base, state, runningReplicas: running, reason, containers, evidence };
}

/** Status from the report row another panel (the owner, its lease live) wrote. */
function fromReport(base: Base, service: StatusInput & { node: NonNullable<StatusInput['node']> }, r: RemoteReport, now: number): HomeStatus {
  const evidence = { sessionId: r.sessionId, lastFrameAgeMs: Math.max(0, now - r.lastFrameAt), reportAgeMs: Math.max(0, now - r.updatedAt), panelId: r.panelId, source: r.source };
  if (r.runtime && !r.runtime.available) {
    const reason = `container runtime unavailable on node ${service.node.name}: ${r.runtime.error ?? 'no detail'}`;
    return { ...base, state: 'unknown', runningReplicas: null, reason, containers: [], evidence };
  }
  return counted(base, service, r.containers, `session ${r.sessionId} on panel ${r.panelId}`, evidence);
}
