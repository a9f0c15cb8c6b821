import { CAPABILITIES, canonicalRoutes, routingHash, serviceUpstream, type RemoteEndpoint, type Route } from '@tether/protocol';
import { TickBatcher } from '@tether/common';
import { sqlOf, type Db } from '../db/database.js';
import { OPEN_READ_LINGER_MS } from '../session-writes/session-store.js';
import { homeJoin, managedSql, whereServicesRunSql } from '../db/where-services-run.js';
import { INGRESS_LABEL, REMOTE_CAPABILITY, remoteEndpointsSql, type EndpointRow } from './serving-nodes.js';
import { certificateIssuerFor } from './certificate-issuers.js';
import { domainIssuers } from './domain-issuers.js';

// The routing map of a host: every route it serves, pointing at the service's
// stable upstream, in canonical order, with the content hash of that form.
// A service placed on one node (not managed by allocations) is served there
// once a deployment made for that node was delivered. A service managed by
// allocations (issue 37) is served by every node with a replica of it and,
// when its agent speaks routing.remote, by every node labelled as an entry
// point (tether.io/ingress=true); such a node's routes carry `remote`: the
// endpoints of the service's serving replicas on other live nodes. A node
// without the capability gets its local replicas only (no `remote`), so its
// map hashes as it always did. One certificate issuer per domain: a route of
// such a node for a domain another node issues carries `certificateIssuer`
// when the node speaks certificates.share (domain-issuers.ts).

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
  node_name: string;
  internal_port: number;
  /** The node speaks routing.remote: its route carries the remote endpoints. */
  remote: boolean;
  /** The node speaks certificates.share: its route may name another node as the domain's issuer. */
  shares: boolean;
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
        SELECT n.id, n.name, ('${REMOTE_CAPABILITY}' = ANY(n.capabilities)) AS remote, ('${CAPABILITIES.CERTIFICATES_SHARE}' = ANY(n.capabilities)) AS shares, (n.labels ->> '${INGRESS_LABEL}') = 'true' AS ingress
        FROM nodes n WHERE n.id = ANY($1::text[])
      )
      SELECT r.domain, r.path_prefix, r.service_id, t.id AS node_id, t.name AS node_name, s.internal_port, w.managed AND t.remote AS remote, w.managed AND t.shares AS shares
      FROM t JOIN (${whereServicesRunSql({ nodes: '$1' })}) w ON w.node_id = t.id
        JOIN services s ON s.id = w.service_id JOIN routes r ON r.service_id = s.id
      WHERE s.internal_port IS NOT NULL
      UNION
      SELECT r.domain, r.path_prefix, r.service_id, t.id, t.name, s.internal_port, true, t.shares
      FROM t JOIN services s ON t.ingress AND t.remote ${homeJoin('s', 'h')} JOIN routes r ON r.service_id = s.id
      WHERE s.internal_port IS NOT NULL AND ${managedSql('s', 'h')}
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
    // Only the domains of nodes that share: without one, nothing is chosen and no query is made.
    const issuers = await domainIssuers(sql, [...new Set(rows.filter((r) => r.remote && r.shares).map((r) => r.domain))]);
    const maps = new Map<string, Route[]>();
    for (const r of rows) {
      const routes = maps.get(r.node_id) ?? [];
      const route: Route = { domain: r.domain, pathPrefix: r.path_prefix, serviceId: r.service_id, upstream: serviceUpstream(r.service_id, r.internal_port) };
      if (!r.remote) {
        routes.push(route);
        maps.set(r.node_id, routes);
        continue;
      }
      const issuer = issuers.get(r.domain);
      const self = issuer?.serving.find((c) => c.name === r.node_name);
      const certificateIssuer = issuer && self ? certificateIssuerFor(self, issuer.issuer, issuer.serving) : undefined;
      routes.push({ ...route, remote: remoteFor(r.node_id, endpoints.get(r.service_id) ?? []), ...(certificateIssuer ? { certificateIssuer } : {}) });
      maps.set(r.node_id, routes);
    }
    return maps;
  }
}
