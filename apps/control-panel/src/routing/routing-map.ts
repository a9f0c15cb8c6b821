import { canonicalRoutes, routingHash, serviceUpstream, type Route } from '@tether/protocol';
import { TickBatcher } from '@tether/common';
import type { Db } from '../db/database.js';
import { OPEN_READ_LINGER_MS } from '../sessions/session-store.js';

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

export class PrismaRoutingMapSource implements RoutingMapSource {
  /** Maps asked for in one turn of the loop (a reconnect storm opens hundreds of sessions at once) share one query. */
  private readonly batch = new TickBatcher<string, Route[]>((nodeIds) => this.load(nodeIds), 500, 2, OPEN_READ_LINGER_MS);

  constructor(private readonly prisma: Db) {}

  async mapFor(nodeId: string): Promise<RoutingMapContent> {
    return routingMapContent((await this.batch.load(nodeId)) ?? []);
  }

  private async load(nodeIds: string[]): Promise<Map<string, Route[]>> {
    const rows = await this.prisma.route.findMany({
      where: {
        service: {
          nodeId: { in: nodeIds },
          internalPort: { not: null },
          deployments: { some: { nodeId: { in: nodeIds }, status: { in: ['delivered', 'running'] } } },
        },
      },
      select: {
        domain: true,
        pathPrefix: true,
        serviceId: true,
        service: { select: { nodeId: true, internalPort: true, deployments: { where: { status: { in: ['delivered', 'running'] } }, select: { nodeId: true } } } },
      },
    });
    const maps = new Map<string, Route[]>();
    for (const r of rows) {
      const nodeId = r.service.nodeId;
      // A service runs on its node only once a deployment made for that node was delivered there.
      if (!nodeId || !r.service.deployments.some((d) => d.nodeId === nodeId)) continue;
      const routes = maps.get(nodeId) ?? [];
      routes.push({ domain: r.domain, pathPrefix: r.pathPrefix, serviceId: r.serviceId, upstream: serviceUpstream(r.serviceId, r.service.internalPort!) });
      maps.set(nodeId, routes);
    }
    return maps;
  }
}
