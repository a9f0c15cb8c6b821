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

/**
 * Routes in canonical order, each with its keys in canonical order; `remote` (routing.remote) sorted by endpoint
 * and `certificateIssuer` (certificates.share) kept only when present, so a map without them hashes as before the
 * capabilities existed.
 */
export function canonicalRoutes(routes: readonly Route[]): Route[] {
  return routes
    .map((r): Route => {
      const base: Route = { domain: r.domain, pathPrefix: r.pathPrefix, serviceId: r.serviceId, upstream: r.upstream };
      if (r.remote !== undefined) {
        base.remote = r.remote
          .map((e) => ({ node: e.node, endpoint: e.endpoint }))
          .sort((a, b) => (a.endpoint < b.endpoint ? -1 : a.endpoint > b.endpoint ? 1 : a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
      }
      if (r.certificateIssuer !== undefined) base.certificateIssuer = { node: r.certificateIssuer.node, challengeVia: r.certificateIssuer.challengeVia };
      return base;
    })
    .sort(compareRoutes);
}

/** Content hash of a routing map: sha256 over the canonical JSON form, hex. Order of input does not matter. */
export function routingHash(routes: readonly Route[]): string {
  return createHash('sha256').update(JSON.stringify(canonicalRoutes(routes))).digest('hex');
}

/**
 * The route shape the static proxy serves without a config change (docs/api.md, "Routes"): the whole domain,
 * or a path prefix of one to three segments `[a-z0-9_-]{1,62}`, matched segment-wise (`/api` never matches
 * `/apix`) and without case, the longest prefix winning. Each route is one DNS name of the answerer:
 * `_<segN>.…._<seg1>.<domain>` under `h.rt.tether.internal` (a segment label is `_` + at most 62 characters,
 * so at most 63; a domain never starts with `_`), so the domain may be as long as DNS's 253 characters less
 * that suffix (21) and the prefix labels (segment length + 2 each).
 */
export const STATIC_ROUTE_SHAPE = Object.freeze({
  maxSegments: 3,
  segmentPattern: '[a-z0-9_-]{1,62}',
  /** 253 − `.h.rt.tether.internal`: the longest route name (prefix labels and domain). */
  maxNameLength: 232,
});
const SEGMENT = new RegExp(`^${STATIC_ROUTE_SHAPE.segmentPattern}$`);

/**
 * The segments of a path prefix in the static shape (`null` and `/` give none: the whole domain); null when the
 * prefix has another shape. Only the canonical form counts: lowercase, no trailing `/` (normalizePathPrefix).
 */
export function staticPrefixSegments(pathPrefix: string | null): string[] | null {
  if (pathPrefix === null || pathPrefix === '/') return [];
  if (!pathPrefix.startsWith('/')) return null;
  const segments = pathPrefix.slice(1).split('/');
  return segments.length <= STATIC_ROUTE_SHAPE.maxSegments && segments.every((s) => SEGMENT.test(s)) ? segments : null;
}

/**
 * The answerer's name of a static-shape route, relative to its hosts zone: the domain, or `_<segN>.…._<seg1>.<domain>`
 * (deepest segment first, as DNS reads). Also the name of the route's file that Caddy's `file` matcher checks.
 */
export function staticRouteName(domain: string, segments: readonly string[]): string {
  return [...segments].reverse().map((s) => `_${s}.`).join('') + domain;
}

/** Whether a route (prefix in canonical form) has the static shape, its name within DNS's length included. */
export function isStaticRouteShape(route: { domain: string; pathPrefix: string | null }): boolean {
  const segments = staticPrefixSegments(route.pathPrefix);
  return segments !== null && staticRouteName(route.domain, segments).length <= STATIC_ROUTE_SHAPE.maxNameLength;
}

/**
 * The stored form of a path prefix as a customer writes it: `/` (or none) is the whole domain (null), one
 * trailing `/` goes, letters are lowercased (matching is without case, so `/API` and `/api` are one route).
 * Anything else is returned as given, for isStaticRouteShape to judge.
 */
export function normalizePathPrefix(pathPrefix: string | null | undefined): string | null {
  if (pathPrefix === undefined || pathPrefix === null || pathPrefix === '/') return null;
  const trimmed = pathPrefix.length > 1 && pathPrefix.endsWith('/') ? pathPrefix.slice(0, -1) : pathPrefix;
  return trimmed.toLowerCase();
}
