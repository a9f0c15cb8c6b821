import { CAPABILITIES } from '@tether/protocol';

// Where a service runs (issue 36), defined once, in SQL and beside it in
// TypeScript. The scheduler (scheduling/, cluster/scheduler-*), the routing
// maps (routing/), the node directory (node-health/) and the session store's
// workload sets (session-writes/) read these; they live here, below all of
// them, so none of those folders imports another for it.
//
// A service is *managed by allocations* when it has no home node yet (no node
// was eligible when it was made: its replicas are pending until the scheduler
// places the first one and makes that node its home), or when its home node
// (services.node_id) announced workload.allocations at its last session open
// (nodes.capabilities). A managed service runs where its `run` allocations
// with a release are, a few replicas on each node. Any other service runs on
// its home node, all its replicas, once a deployment made for that node was
// delivered there or runs.

export const ALLOCATIONS_CAPABILITY = CAPABILITIES.WORKLOAD_ALLOCATIONS;

/** True when a service with this home node (null: none yet) is placed by the scheduler. */
export function managedByAllocations(home: { capabilities?: readonly string[] | null } | null): boolean {
  return home === null || home.capabilities?.includes(ALLOCATIONS_CAPABILITY) === true;
}

/**
 * The same test in SQL, on the service row under `service` and its home node's row under `home`, joined with
 * {@link homeJoin} (a LEFT JOIN: a service without a home has no row there). Constants only are spliced in.
 */
export function managedSql(service: string, home: string): string {
  return `(${service}.node_id IS NULL OR '${ALLOCATIONS_CAPABILITY}' = ANY(${home}.capabilities))`;
}

/** `LEFT JOIN nodes <home> ON <home>.id = <service>.node_id`: the home node's row, none for a service without one. */
export function homeJoin(service: string, home: string): string {
  return `LEFT JOIN nodes ${home} ON ${home}.id = ${service}.node_id`;
}

/**
 * The deployments an unmanaged service (row `service`) may run on its home node: made for that node, delivered
 * there or running (a service moved runs there once deployed there). `FROM ${homeDeploymentsSql('s')}` names
 * them `d`.
 */
export function homeDeploymentsSql(service: string): string {
  return `deployments d WHERE d.service_id = ${service}.id AND d.node_id = ${service}.node_id AND d.status IN ('delivered', 'running')`;
}

export interface WhereServicesRunFilter {
  /** A text[] parameter (`$1`): only these nodes. */
  nodes?: string;
  /** A text[] parameter: only these services. */
  services?: string;
}

/**
 * Where services run, as rows `(service_id, node_id, replicas, managed)`: a managed service once per node holding
 * `run` allocations of it with a release (replicas: how many), an unmanaged one on its home node once it runs a
 * deployment made for it there (replicas: its wanted count). The filters are spliced into each branch, so a read
 * of a few nodes reads only theirs.
 */
export function whereServicesRunSql(filter: WhereServicesRunFilter = {}): string {
  const only = (column: string, param: string | undefined) => (param ? ` AND ${column} = ANY(${param}::text[])` : '');
  return `SELECT a.service_id, a.node_id, count(*)::int AS replicas, true AS managed
    FROM allocations a JOIN services s ON s.id = a.service_id ${homeJoin('s', 'h')}
    WHERE a.desired = 'run' AND a.release_id IS NOT NULL AND ${managedSql('s', 'h')}${only('a.node_id', filter.nodes)}${only('a.service_id', filter.services)}
    GROUP BY a.service_id, a.node_id
    UNION ALL
    SELECT s.id, s.node_id, s.replicas, false
    FROM services s JOIN nodes h ON h.id = s.node_id
    WHERE NOT ${managedSql('s', 'h')}${only('s.node_id', filter.nodes)}${only('s.id', filter.services)}
      AND EXISTS (SELECT 1 FROM ${homeDeploymentsSql('s')})`;
}
