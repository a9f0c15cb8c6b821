import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { canonicalRoutes, isStaticRouteShape, normalizePathPrefix, staticPrefixSegments, staticRouteName, type Route } from '@tether/protocol';
import { CANARY_HOST } from './render.js';
import { splitHostPort } from '@tether/common';
import { isValidDomain, isValidUpstream } from './route-validation.js';

// The static proxy's routing data (docs/architecture.md, "Static proxy"):
// what the answerer serves (SRV + A records) and which domains Caddy may
// route and certify (one empty file per domain), computed from the routing map
// and the containers that are ready now. Pure: the same inputs give the same
// zone body, so an unchanged map or an unchanged set of containers writes
// nothing.

/** The zone the answerer serves; under the reserved suffix, so no customer domain can be in it. */
export const ANSWER_ZONE = 'rt.tether.internal';
/** SRV names of routes: `<domain>.h.<zone>` for a whole domain, `_<segN>.…._<seg1>.<domain>.h.<zone>` for a prefix (protocol's staticRouteName). */
export const HOSTS_LABEL = 'h';
/** A/AAAA names of upstream targets: `<target>.e.<zone>` (SRV targets must be names, never IPs): `c-<container>`, `ip-<address>`, `r-<address>-<port>` (another node's replica). */
export const TARGETS_LABEL = 'e';
/** A/AAAA names of address sets (LOOKUP_SRV): `<digest of the set>.a.<zone>`, the same records for as long as the name exists. */
export const ADDRESSES_LABEL = 'a';
/** SRV names of forwarded ACME challenges (certificates.share): `<domain>.c.<zone>` names the domain's issuer. */
export const CHALLENGES_LABEL = 'c';
/** Answered by the answerer whatever the map: what its health probe asks. */
export const HEALTH_NAME = `health.${ANSWER_ZONE}`;


/**
 * The folders of one empty file per name that Caddy reads per request (under the answers dir): `domains` (any
 * route; the TLS ask check), `prefixed` (a domain with a prefix route: an upper-case path there takes the
 * case-blind lookups), `lookups` (one folder per route, named as its answerer owner, holding how Caddy looks it up:
 * the static config's `file` matchers, see LOOKUP_SRV), `challenges` (a domain another node issues: its HTTP-01
 * challenges are forwarded there, certificates.share). `routes` (one flat file per route) of older agents is no
 * longer written.
 */
export const NAME_LISTS = ['domains', 'prefixed', 'lookups', 'challenges'] as const;
export type NameList = (typeof NAME_LISTS)[number];

/**
 * The entries of a route's `lookups/<name>/` folder. Every route has `srv`: an SRV lookup of its owner (targets
 * and ports). A route whose targets all listen on one port (its local containers, an IP upstream, remote replicas
 * on one port) also has `<port>-<set>`, which sorts first: Caddy then looks up `<set>.a.<zone>`, the A/AAAA
 * records of exactly those addresses, and dials that port. Caddy 2.6.2 caches 100 SRV names (random eviction),
 * while its A cache is evicted only once that SRV cache is full, and keys it by name and port: a name whose
 * records never change can be kept as long as Caddy likes (ADDRESS_REFRESH_MS), and a route whose addresses
 * change gets another file, so its next request looks up the new set at once (docs/benchmarks.md, "Static proxy").
 */
export const LOOKUP_SRV = 'srv';

/** Caddy's refresh of an address set's lookup: its records never change, so only an answerer outage would show. */
export const ADDRESS_REFRESH_MS = 3_600_000;

/** The name of a set of addresses (`A 10.0.0.1` …, any order): the first 16 hex digits of their digest. */
export function addressSetName(addresses: Iterable<string>): string {
  return createHash('sha256').update([...addresses].sort().join('\n')).digest('hex').slice(0, 16);
}

/** One ready container of a service, as it can be dialled from Caddy. */
export interface Endpoint {
  /** Container id (its first 12 characters name the SRV target). */
  id: string;
  /** Address on Tether's network (IPv4 or IPv6). */
  ip: string;
  /**
   * false: running but not to be picked now (health not passed, or draining). Only its target's A record is
   * answered: a lookup Caddy cached before it left still names that target, and the dial resolves it per
   * connection, so without the record every such request fails (502) until the cache expires.
   */
  serving?: boolean;
}

/** Ready endpoints per service id (docker-endpoints.ts). */
export type EndpointMap = ReadonlyMap<string, readonly Endpoint[]>;

/**
 * Whether a route can be served by the static config: a valid domain, the whole domain or up to three segments
 * (protocol's STATIC_ROUTE_SHAPE). A route stored by an older panel in a form this one normalises (`/`, a trailing
 * `/`, upper case) is served as its normal form.
 */
export function isStaticShape(route: Pick<Route, 'domain' | 'pathPrefix'>): boolean {
  return isValidDomain(route.domain) && isStaticRouteShape({ domain: route.domain, pathPrefix: normalizePathPrefix(route.pathPrefix) });
}

export interface Answers {
  /** Zone records without SOA/NS (knot-answerer.ts adds them with the serial). */
  records: string[];
  /** Domains this node may ask the CA for, or serves a shared certificate of (the files the TLS ask check reads). */
  domains: string[];
  /** Domains another node issues (certificates.share): their HTTP-01 challenges go to its `challengeVia`. */
  challenges: string[];
  /** Domains with a prefix route: an upper-case path there pays the case-blind lookups. */
  prefixed: string[];
  /** `<name>/srv` for every route (staticRouteName), and `<name>/<port>` when one port serves it (LOOKUP_SRV). */
  lookups: string[];
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

/** Another node's replica (routing.remote `address:port`, IPv6 in brackets) as an SRV target: its name carries the port too. */
function remoteTarget(endpoint: string): { name: string; type: 'A' | 'AAAA'; ip: string; port: number } | null {
  const { host, port } = splitHostPort(endpoint);
  const family = isIP(host);
  const label = `r-${host.toLowerCase().replace(/[.:]/g, '-')}-${port}`;
  if (family === 0 || !/^[a-z0-9-]{1,63}$/.test(label)) return null;
  return { name: `${label}.${TARGETS_LABEL}`, type: family === 4 ? 'A' : 'AAAA', ip: host, port };
}

export interface AnswerOptions {
  canaryUpstream?: string | null;
  /** Remote endpoints failing this agent's own probe (remote-probes.ts): never answered. */
  failingRemote?: ReadonlySet<string>;
  /**
   * certificates.share: domains another node issues whose certificate is in this node's proxy storage. A domain
   * another node issues is left out of `domains` (Caddy's ask refuses it: no order to the CA) until it is here.
   */
  sharedInPlace?: ReadonlySet<string>;
}

/**
 * Records for `routes`. An upstream that names a service alias (`svc-<id>:port`)
 * points at every ready container of the route's service, and while none is
 * ready at the route's `remote` endpoints (routing.remote: the service's replicas
 * on other nodes) that pass the agent's probe; an upstream that is an IP literal
 * points at that address; anything else (a name the answerer cannot resolve) has
 * no record and answers `no-upstream`.
 */
export function computeAnswers(routes: readonly Route[], endpoints: EndpointMap, options: AnswerOptions = {}): Answers {
  const srv = new Set<string>();
  const targets = new Set<string>();
  const domains = new Set<string>();
  const prefixed = new Set<string>();
  const lookups = new Set<string>();
  const sets = new Set<string>();
  const challenges = new Map<string, string>();
  const legacy: Route[] = [];
  let unserved = 0;
  for (const route of canonicalRoutes(routes)) {
    if (!isStaticShape(route) || !isValidUpstream(route.upstream)) {
      legacy.push(route);
      continue;
    }
    const { host, port } = splitHostPort(route.upstream);
    const segments = staticPrefixSegments(normalizePathPrefix(route.pathPrefix)) ?? [];
    const name = staticRouteName(route.domain, segments);
    const owner = `${name}.${HOSTS_LABEL}`;
    const found = isIP(host) ? [null] : (endpoints.get(route.serviceId) ?? []);
    let served = 0;
    // The route's targets' addresses and ports: one port, and Caddy can look the set up by address.
    const addresses = new Set<string>();
    const ports = new Set<number>();
    for (const endpoint of found) {
      const target = targetFor(host, endpoint);
      if (!target) continue;
      targets.add(`${target.name} ${target.type} ${target.ip}`);
      if (endpoint?.serving === false) continue;
      srv.add(`${owner} SRV 10 10 ${port} ${target.name}`);
      addresses.add(`${target.type} ${target.ip}`);
      ports.add(port);
      served += 1;
    }
    // Local first: another node costs a hop on the private network. A passing remote target keeps its A record
    // while local replicas serve, as a leaving container does: a lookup Caddy cached before they came still names it.
    const local = served > 0;
    for (const { endpoint } of isIP(host) ? [] : (route.remote ?? [])) {
      const target = options.failingRemote?.has(endpoint) ? null : remoteTarget(endpoint);
      if (!target) continue;
      targets.add(`${target.name} ${target.type} ${target.ip}`);
      if (local) continue;
      srv.add(`${owner} SRV 10 10 ${target.port} ${target.name}`);
      addresses.add(`${target.type} ${target.ip}`);
      ports.add(target.port);
      served += 1;
    }
    if (served === 0) unserved += 1;
    lookups.add(`${name}/${LOOKUP_SRV}`);
    if (ports.size === 1) {
      const set = addressSetName(addresses);
      for (const address of addresses) sets.add(`${set}.${ADDRESSES_LABEL} ${address}`);
      lookups.add(`${name}/${[...ports][0]!}-${set}`);
    }
    const via = route.certificateIssuer ? remoteTarget(route.certificateIssuer.challengeVia) : null;
    if (via) {
      challenges.set(route.domain, `${route.domain}.${CHALLENGES_LABEL} SRV 10 10 ${via.port} ${via.name}`);
      targets.add(`${via.name} ${via.type} ${via.ip}`);
    }
    domains.add(route.domain);
    if (segments.length > 0) prefixed.add(route.domain);
  }
  // The canary's route goes through the answerer too, so an answerer outage shows as a canary drop.
  const canaryUpstream = options.canaryUpstream ? splitHostPort(options.canaryUpstream) : null;
  const canary = canaryUpstream ? targetFor(canaryUpstream.host, null) : null;
  if (canary && canaryUpstream) {
    srv.add(`${CANARY_HOST}.${HOSTS_LABEL} SRV 10 10 ${canaryUpstream.port} ${canary.name}`);
    targets.add(`${canary.name} ${canary.type} ${canary.ip}`);
  }
  for (const [domain, record] of challenges) {
    srv.add(record);
    if (!options.sharedInPlace?.has(domain)) domains.delete(domain);
  }
  const records = [`health A 127.0.0.1`, ...[...srv].sort(), ...[...targets].sort(), ...[...sets].sort()];
  const lists = { domains: [...domains].sort(), prefixed: [...prefixed].sort(), lookups: [...lookups].sort(), challenges: [...challenges.keys()].sort() };
  // A map without shared certificates digests as before (the answers of an upgraded agent are not rewritten).
  const digested = lists.challenges.length === 0 ? [records, lists.domains, lists.prefixed, lists.lookups] : [records, lists.domains, lists.prefixed, lists.lookups, lists.challenges];
  const digest = createHash('sha256').update(JSON.stringify(digested)).digest('hex').slice(0, 32);
  return { records, ...lists, legacy, unserved, digest };
}
