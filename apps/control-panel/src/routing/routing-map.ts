import { canonicalRoutes, routingHash, serviceUpstream, type Route } from '@tether/protocol';
import { TickBatcher } from '@tether/common';
import { sqlOf, type Db } from '../db/database.js';
import { OPEN_READ_LINGER_MS } from '../session-writes/session-store.js';

// The routing map of a host: every route whose service runs there (it has a
// delivered or running deployment and a port), pointing at the service's
// stable upstream, in canonical order, with the content hash of that form.

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

export class DbRoutingMapSource implements RoutingMapSource {
  /** Maps asked for in one turn of the loop (a reconnect storm opens hundreds of sessions at once) share one query. */
  private readonly batch = new TickBatcher<string, Route[]>((nodeIds) => this.load(nodeIds), 500, 2, OPEN_READ_LINGER_MS);

  constructor(private readonly prisma: Db) {}

  async mapFor(nodeId: string): Promise<RoutingMapContent> {
    return routingMapContent((await this.batch.load(nodeId)) ?? []);
  }

  private async load(nodeIds: string[]): Promise<Map<string, Route[]>> {
    // A service runs on its node only once a deployment made for that node was delivered there.
    const rows = await sqlOf(this.prisma).rows<{ domain: string; path_prefix: string | null; service_id: string; node_id: string; internal_port: number }>(
      `SELECT r.domain, r.path_prefix, r.service_id, s.node_id, s.internal_port
      FROM routes r JOIN services s ON s.id = r.service_id
      WHERE s.node_id = ANY($1::text[]) AND s.internal_port IS NOT NULL
        AND EXISTS (SELECT 1 FROM deployments d WHERE d.service_id = s.id AND d.node_id = s.node_id AND d.status IN ('delivered', 'running'))`,
      [nodeIds],
    );
    const maps = new Map<string, Route[]>();
    for (const r of rows) {
      const routes = maps.get(r.node_id) ?? [];
      routes.push({ domain: r.domain, pathPrefix: r.path_prefix, serviceId: r.service_id, upstream: serviceUpstream(r.service_id, r.internal_port) });
      maps.set(r.node_id, routes);
    }
    return maps;
  }
}
