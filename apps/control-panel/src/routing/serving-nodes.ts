import { CAPABILITIES } from '@tether/protocol';
import type { Sql } from '../db/sql.js';
import { homeJoin, managedSql, whereServicesRunSql } from '../db/where-services-run.js';

// Where a route is served (issue 37), defined once in SQL: the routing maps
// (routing-map.ts), the route answers of the API (GET /v1/routes/:id) and
// the routing audience (routing-audience.ts) read these, so the nodes a map
// goes to and the nodes the API names never disagree.
//
// A service managed by allocations is served by every node with a replica
// of it (a `run` allocation with a release: where it runs, as
// db/where-services-run.ts defines it) and by every node labelled
// tether.io/ingress=true whose agent speaks routing.remote. Any other
// service is served by its node. A replica is reachable from other nodes
// (a remote endpoint) while its node's session is live, its agent reported
// it running, not unhealthy, with a published endpoint, and the scheduler
// still wants it.

export const REMOTE_CAPABILITY = CAPABILITIES.ROUTING_REMOTE;
/** The node label that makes a node an entry point for every routed service managed by allocations. */
export const INGRESS_LABEL = 'tether.io/ingress';

/** One serving replica reachable from other nodes. */
export interface EndpointRow {
  service_id: string;
  node_id: string;
  node_name: string;
  endpoint: string;
}

/** Remote endpoints of the services in the text[] parameter `param`. Constants only are spliced in. */
export function remoteEndpointsSql(param: string): string {
  return `SELECT a.service_id, m.id AS node_id, m.name AS node_name, a.status ->> 'endpoint' AS endpoint
    FROM allocations a JOIN nodes m ON m.id = a.node_id
    WHERE a.service_id = ANY(${param}::text[]) AND a.desired = 'run'
      AND a.status ->> 'endpoint' IS NOT NULL AND a.status ->> 'state' = 'running'
      AND COALESCE(a.status ->> 'health', 'none') IN ('none', 'healthy')
      AND m.unreachable_since IS NULL AND NOT m.decommissioned AND '${REMOTE_CAPABILITY}' = ANY(m.capabilities)
    ORDER BY a.service_id, m.name, a.status ->> 'endpoint'`;
}

export interface ServingNodeRow {
  service_id: string;
  node_id: string;
  node_name: string;
  private_address: string | null;
  /** Why it serves: `replica` (a replica runs there), `ingress` (an entry point), `home` (a service on one node). */
  role: 'replica' | 'ingress' | 'home';
}

/** The nodes serving each service in `serviceIds`, ordered by service and node name. */
export async function servingNodes(sql: Sql, serviceIds: readonly string[]): Promise<ServingNodeRow[]> {
  if (serviceIds.length === 0) return [];
  return sql.rows<ServingNodeRow>(
    `SELECT DISTINCT ON (x.service_id, n.name) x.service_id, n.id AS node_id, n.name AS node_name, n.private_address, x.role
    FROM (
      SELECT s.id AS service_id, s.node_id, 'home' AS role, 0 AS rank
      FROM services s JOIN nodes h ON h.id = s.node_id WHERE s.id = ANY($1::text[]) AND NOT ${managedSql('s', 'h')}
      UNION ALL
      SELECT w.service_id, w.node_id, 'replica', 1
      FROM (${whereServicesRunSql({ services: '$1' })}) w WHERE w.managed
      UNION ALL
      SELECT s.id, n.id, 'ingress', 2
      FROM services s ${homeJoin('s', 'h')} JOIN nodes n ON (n.labels ->> '${INGRESS_LABEL}') = 'true' AND '${REMOTE_CAPABILITY}' = ANY(n.capabilities)
      WHERE s.id = ANY($1::text[]) AND ${managedSql('s', 'h')} AND NOT n.decommissioned
        AND EXISTS (SELECT 1 FROM allocations a WHERE a.service_id = s.id AND a.desired = 'run' AND a.release_id IS NOT NULL)
    ) x JOIN nodes n ON n.id = x.node_id
    ORDER BY x.service_id, n.name, x.rank`,
    [serviceIds],
  );
}

/** The nodes whose maps carry a service's routes (its serving nodes and its home node): who a route change is pushed to. */
export async function routingNodeIds(sql: Sql, serviceId: string, homeNodeId: string | null): Promise<string[]> {
  const serving = await servingNodes(sql, [serviceId]);
  return [...new Set([...(homeNodeId === null ? [] : [homeNodeId]), ...serving.map((s) => s.node_id)])].sort();
}
