import { canonicalRoutes, routingHash, serviceUpstream, type Route } from '@tether/protocol';
import type { Db } from '../db/database.js';

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
  constructor(private readonly prisma: Db) {}

  async mapFor(nodeId: string): Promise<RoutingMapContent> {
    const rows = await this.prisma.route.findMany({
      where: {
        service: {
          nodeId,
          internalPort: { not: null },
          deployments: { some: { nodeId, status: { in: ['delivered', 'running'] } } },
        },
      },
      select: { domain: true, pathPrefix: true, serviceId: true, service: { select: { internalPort: true } } },
    });
    return routingMapContent(
      rows.map((r) => ({
        domain: r.domain,
        pathPrefix: r.pathPrefix,
        serviceId: r.serviceId,
        upstream: serviceUpstream(r.serviceId, r.service.internalPort!),
      })),
    );
  }
}
