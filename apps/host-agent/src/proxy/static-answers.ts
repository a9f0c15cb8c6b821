import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { canonicalRoutes, isStaticRouteShape, staticPrefixSegment, type Route } from '@tether/protocol';
import { CANARY_HOST } from './render.js';
import { splitHostPort } from './host-port.js';
import { isValidDomain, isValidUpstream } from './route-validation.js';

// The static proxy's routing data (docs/architecture.md, "Static proxy"):
// what the answerer serves (SRV + A records) and which domains Caddy may
// route and certify (one empty file per domain), computed from the routing map
// and the containers that are ready now. Pure: the same inputs give the same
// zone body, so an unchanged map or an unchanged set of containers writes
// nothing.

/** The zone the answerer serves; under the reserved suffix, so no customer domain can be in it. */
export const ANSWER_ZONE = 'rt.tether.internal';
/** SRV names of hosts: `<domain>.h.<zone>`; of first-segment prefixes: `_p<segment>.<domain>.h.<zone>`. */
export const HOSTS_LABEL = 'h';
/** A/AAAA names of upstream targets: `<target>.e.<zone>` (SRV targets must be names, never IPs). */
export const TARGETS_LABEL = 'e';
/** Answered by the answerer whatever the map: what its health probe asks. */
export const HEALTH_NAME = `health.${ANSWER_ZONE}`;


/** The folders of one empty file per name that Caddy reads per request (under the answers dir). */
export const NAME_LISTS = ['domains', 'whole', 'prefixed', 'prefixes'] as const;
export type NameList = (typeof NAME_LISTS)[number];

/** The file naming a first-segment route: what the static config's `file` matcher tries for `/<segment>…` on `<domain>`. */
export function prefixFileName(segment: string, domain: string): string {
  return `${segment}@${domain}`;
}

/** One ready container of a service, as it can be dialled from Caddy. */
export interface Endpoint {
  /** Container id (its first 12 characters name the SRV target). */
  id: string;
  /** Address on Tether's network (IPv4 or IPv6). */
  ip: string;
}

/** Ready endpoints per service id (docker-endpoints.ts). */
export type EndpointMap = ReadonlyMap<string, readonly Endpoint[]>;

/** Whether a route can be served by the static config: plain domain, whole domain or one lowercase first segment. */
export function isStaticShape(route: Pick<Route, 'domain' | 'pathPrefix'>): boolean {
  if (!isValidDomain(route.domain)) return false;
  // A stored "/" is the whole domain.
  return route.pathPrefix === '/' || isStaticRouteShape(route);
}

export interface Answers {
  /** Zone records without SOA/NS (knot-answerer.ts adds them with the serial). */
  records: string[];
  /** Domains with at least one route (the files the TLS ask check reads). */
  domains: string[];
  /** Domains with a whole-domain route (the files Caddy's `file` matcher routes by host). */
  whole: string[];
  /** Domains with a first-segment route: an upper-case first segment there pays the case-blind lookup. */
  prefixed: string[];
  /** First-segment routes as `<segment>@<domain>` files: a request pays one lookup, and a segment without a route is no-route. */
  prefixes: string[];
  /** Routes outside the static shape: the caller renders them into the config (the reload-costing path). */
  legacy: Route[];
  /** Routes with no ready endpoint now (answered `no-upstream` until one is ready). */
  unserved: number;
  /** Digest of records and name lists: equal digests mean nothing to write. */
  digest: string;
}

/** `upstreamHost`: as splitHostPort gives it (an IPv6 address without brackets). */
function targetFor(upstreamHost: string, endpoint: Endpoint | null): { name: string; type: 'A' | 'AAAA'; ip: string } | null {
  const ip = endpoint?.ip ?? upstreamHost;
  const family = isIP(ip);
  if (family === 0) return null;
  const label = endpoint ? `c-${endpoint.id.slice(0, 12).toLowerCase()}` : `ip-${ip.toLowerCase().replace(/[.:]/g, '-')}`;
  if (!/^[a-z0-9-]{1,63}$/.test(label)) return null;
  return { name: `${label}.${TARGETS_LABEL}`, type: family === 4 ? 'A' : 'AAAA', ip };
}

/**
 * Records for `routes`. An upstream that names a service alias (`svc-<id>:port`)
 * points at every ready container of the route's service; an upstream that is an
 * IP literal points at that address; anything else (a name the answerer cannot
 * resolve) has no record and answers `no-upstream`.
 */
export function computeAnswers(routes: readonly Route[], endpoints: EndpointMap, options: { canaryUpstream?: string | null } = {}): Answers {
  const srv = new Set<string>();
  const targets = new Set<string>();
  const domains = new Set<string>();
  const whole = new Set<string>();
  const prefixed = new Set<string>();
  const prefixes = new Set<string>();
  const legacy: Route[] = [];
  let unserved = 0;
  for (const route of canonicalRoutes(routes)) {
    if (!isStaticShape(route) || !isValidUpstream(route.upstream)) {
      legacy.push(route);
      continue;
    }
    const { host, port } = splitHostPort(route.upstream);
    const segment = staticPrefixSegment(route.pathPrefix);
    const owner = segment === null ? `${route.domain}.${HOSTS_LABEL}` : `_p${segment}.${route.domain}.${HOSTS_LABEL}`;
    const found = isIP(host) ? [null] : (endpoints.get(route.serviceId) ?? []);
    let served = 0;
    for (const endpoint of found) {
      const target = targetFor(host, endpoint);
      if (!target) continue;
      targets.add(`${target.name} ${target.type} ${target.ip}`);
      srv.add(`${owner} SRV 10 10 ${port} ${target.name}`);
      served += 1;
    }
    if (served === 0) unserved += 1;
    domains.add(route.domain);
    if (segment === null) whole.add(route.domain);
    else {
      prefixed.add(route.domain);
      prefixes.add(prefixFileName(segment, route.domain));
    }
  }
  // The canary's route goes through the answerer too, so an answerer outage shows as a canary drop.
  const canaryUpstream = options.canaryUpstream ? splitHostPort(options.canaryUpstream) : null;
  const canary = canaryUpstream ? targetFor(canaryUpstream.host, null) : null;
  if (canary && canaryUpstream) {
    srv.add(`${CANARY_HOST}.${HOSTS_LABEL} SRV 10 10 ${canaryUpstream.port} ${canary.name}`);
    targets.add(`${canary.name} ${canary.type} ${canary.ip}`);
  }
  const records = [`health A 127.0.0.1`, ...[...srv].sort(), ...[...targets].sort()];
  const lists = { domains: [...domains].sort(), whole: [...whole].sort(), prefixed: [...prefixed].sort(), prefixes: [...prefixes].sort() };
  const digest = createHash('sha256').update(JSON.stringify([records, lists.domains, lists.whole, lists.prefixed, lists.prefixes])).digest('hex').slice(0, 32);
  return { records, ...lists, legacy, unserved, digest };
}
