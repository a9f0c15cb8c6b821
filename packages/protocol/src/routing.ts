import { createHash } from 'node:crypto';
import type { Route } from './messages.js';

/**
 * The stable host name a service is reachable under on Tether's Docker network.
 * The agent gives every container of the service this network alias; the panel
 * names it as the upstream in routing maps. Both depend only on the service id,
 * so a redeploy never changes routing.
 */
/**
 * Host names Tether keeps for itself (the agents' canary, docs/operations.md
 * "Canary"): the panel refuses a customer route for this domain or any under it.
 */
export const RESERVED_HOST_SUFFIX = 'tether.internal';

export function isReservedHost(domain: string): boolean {
  const d = domain.toLowerCase().replace(/\.$/, '');
  return d === RESERVED_HOST_SUFFIX || d.endsWith(`.${RESERVED_HOST_SUFFIX}`);
}

export function serviceUpstreamHost(serviceId: string): string {
  return `svc-${serviceId.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`;
}

export function serviceUpstream(serviceId: string, port: number): string {
  return `${serviceUpstreamHost(serviceId)}:${port}`;
}

function compareRoutes(a: Route, b: Route): number {
  if (a.domain !== b.domain) return a.domain < b.domain ? -1 : 1;
  // Longer path prefixes first, so the most specific route matches first; null (whole domain) last.
  const pa = a.pathPrefix ?? '';
  const pb = b.pathPrefix ?? '';
  if (pa.length !== pb.length) return pb.length - pa.length;
  if (pa !== pb) return pa < pb ? -1 : 1;
  if (a.serviceId !== b.serviceId) return a.serviceId < b.serviceId ? -1 : 1;
  return a.upstream < b.upstream ? -1 : a.upstream > b.upstream ? 1 : 0;
}

/** Routes in canonical order, each with its keys in canonical order. */
export function canonicalRoutes(routes: readonly Route[]): Route[] {
  return routes
    .map((r) => ({ domain: r.domain, pathPrefix: r.pathPrefix, serviceId: r.serviceId, upstream: r.upstream }))
    .sort(compareRoutes);
}

/** Content hash of a routing map: sha256 over the canonical JSON form, hex. Order of input does not matter. */
export function routingHash(routes: readonly Route[]): string {
  return createHash('sha256').update(JSON.stringify(canonicalRoutes(routes))).digest('hex');
}

/**
 * The route shape a static proxy (capability `proxy.static`) serves without a config change:
 * the whole domain, or one first path segment `/seg` (`/seg/`) of lowercase letters, digits and `-`.
 * The domain stays short enough that `_p<segment>.<domain>` under the answerer's zone fits DNS's 253.
 */
export const STATIC_ROUTE_SHAPE = Object.freeze({ maxDomainLength: 167, segmentPattern: '^/([a-z0-9-]{1,62})/?$' });
const STATIC_SEGMENT = new RegExp(STATIC_ROUTE_SHAPE.segmentPattern);

export function isStaticRouteShape(route: { domain: string; pathPrefix: string | null }): boolean {
  return route.domain.length <= STATIC_ROUTE_SHAPE.maxDomainLength && (route.pathPrefix === null || STATIC_SEGMENT.test(route.pathPrefix));
}

/** The segment of a static-shape path prefix (`/api` and `/api/` give `api`); null for the whole domain or another shape. */
export function staticPrefixSegment(pathPrefix: string | null): string | null {
  return pathPrefix === null ? null : (STATIC_SEGMENT.exec(pathPrefix)?.[1] ?? null);
}
