import { canonicalRoutes, routingHash, serviceUpstream, type RemoteEndpoint, type Route } from '@tether/protocol';
import { TickBatcher } from '@tether/common';
import { sqlOf, type Db } from '../db/database.js';
import { OPEN_READ_LINGER_MS } from '../session-writes/session-store.js';
import { managedSql } from '../scheduling/managed.js';
import { INGRESS_LABEL, REMOTE_CAPABILITY, remoteEndpointsSql, type EndpointRow } from './serving-nodes.js';

// The routing map of a host: every route it serves, pointing at the service's
// stable upstream, in canonical order, with the content hash of that form.
// A service placed on one node (not managed by allocations) is served there
// once a deployment made for that node was delivered. A service managed by
// allocations (issue 37) is served by every node with a replica of it and,
// when its agent speaks routing.remote, by every node labelled as an entry
// point (tether.io/ingress=true); such a node's routes carry `remote`: the
// endpoints of the service's serving replicas on other live nodes. A node
// without the capability gets its local replicas only (no `remote`), so its
// map hashes as it always did.

export interface RoutingMapContent {
  routes: Route[];
  hash: string;
}

export interface RoutingMapSource {
  mapFor(nodeId: string): Promise<RoutingMapContent>;
}

export function routingMapContent(routes: Route[]): RoutingMapContent {
  const canonical = canonicalRoutes(routes);
  return { routes: canonical, hash: routingHash(canonical) };
}

interface RouteRow {
  domain: string;
  path_prefix: string | null;
  service_id: string;
  node_id: string;
  internal_port: number;
  /** The node speaks routing.remote: its route carries the remote endpoints. */
  remote: boolean;
}

/** The most remote endpoints one route carries (the protocol's bound). */
const MAX_REMOTE = 100;

/**
 * `remote` of one node's route: the service's endpoints on other nodes, the node's own left out (its agent
 * answers its local replicas from Docker itself).
 */
export function remoteFor(nodeId: string, endpoints: readonly EndpointRow[]): RemoteEndpoint[] {
  return endpoints
    .filter((e) => e.node_id !== nodeId)
    .map((e) => ({ node: e.node_name, endpoint: e.endpoint }))
    .sort((a, b) => (a.endpoint < b.endpoint ? -1 : a.endpoint > b.endpoint ? 1 : 0))
    .slice(0, MAX_REMOTE);
}

export class DbRoutingMapSource implements RoutingMapSource {
  /** Maps asked for in one turn of the loop (a reconnect storm opens hundreds of sessions at once) share one query. */
  private readonly batch = new TickBatcher<string, Route[]>((nodeIds) => this.load(nodeIds), 500, 2, OPEN_READ_LINGER_MS);

  constructor(private readonly prisma: Db) {}

  async mapFor(nodeId: string): Promise<RoutingMapContent> {
    return routingMapContent((await this.batch.load(nodeId)) ?? []);
  }

  private async load(nodeIds: string[]): Promise<Map<string, Route[]>> {
    const sql = sqlOf(this.prisma);
    const rows = await sql.rows<RouteRow>(
      `WITH t AS (
        SELECT n.id, ('${REMOTE_CAPABILITY}' = ANY(n.capabilities)) AS remote, (n.labels ->> '${INGRESS_LABEL}') = 'true' AS ingress
        FROM nodes n WHERE n.id = ANY($1::text[])
      )
      SELECT r.domain, r.path_prefix, r.service_id, t.id AS node_id, s.internal_port, false AS remote
      FROM t JOIN services s ON s.node_id = t.id JOIN nodes h ON h.id = s.node_id JOIN routes r ON r.service_id = s.id
      WHERE s.internal_port IS NOT NULL AND NOT ${managedSql('h')}
        AND EXISTS (SELECT 1 FROM deployments d WHERE d.service_id = s.id AND d.node_id = s.node_id AND d.status IN ('delivered', 'running'))
      UNION
      SELECT r.domain, r.path_prefix, r.service_id, t.id, s.internal_port, t.remote
      FROM t JOIN allocations a ON a.node_id = t.id AND a.desired = 'run' AND a.release_id IS NOT NULL
        JOIN services s ON s.id = a.service_id JOIN nodes h ON h.id = s.node_id JOIN routes r ON r.service_id = s.id
      WHERE s.internal_port IS NOT NULL AND ${managedSql('h')}
      UNION
      SELECT r.domain, r.path_prefix, r.service_id, t.id, s.internal_port, true
      FROM t JOIN services s ON t.ingress AND t.remote JOIN nodes h ON h.id = s.node_id JOIN routes r ON r.service_id = s.id
      WHERE s.internal_port IS NOT NULL AND ${managedSql('h')}
        AND EXISTS (SELECT 1 FROM allocations a WHERE a.service_id = s.id AND a.desired = 'run' AND a.release_id IS NOT NULL)`,
      [nodeIds],
    );
    const remoteServices = [...new Set(rows.filter((r) => r.remote).map((r) => r.service_id))];
    const endpoints = new Map<string, EndpointRow[]>();
    if (remoteServices.length > 0) {
      for (const e of await sql.rows<EndpointRow>(remoteEndpointsSql('$1'), [remoteServices])) {
        const list = endpoints.get(e.service_id) ?? [];
        list.push(e);
        endpoints.set(e.service_id, list);
      }
    }
    const maps = new Map<string, Route[]>();
    for (const r of rows) {
      const routes = maps.get(r.node_id) ?? [];
      const route: Route = { domain: r.domain, pathPrefix: r.path_prefix, serviceId: r.service_id, upstream: serviceUpstream(r.service_id, r.internal_port) };
      routes.push(r.remote ? { ...route, remote: remoteFor(r.node_id, endpoints.get(r.service_id) ?? []) } : route);
      maps.set(r.node_id, routes);
    }
    return maps;
  }
}
