import { createHash } from 'node:crypto';
import { STATIC_ROUTE_SHAPE } from '@tether/protocol';
import { canonicalJson } from './canonical-json.js';
import { CANARY_HOST, CANARY_SERVER_NAME, SERVER_NAME, acmeIssuer, type RenderOptions } from './render.js';
import { ADDRESSES_LABEL, ADDRESS_REFRESH_MS, ANSWER_ZONE, CHALLENGES_LABEL, HOSTS_LABEL, type NameList } from './static-answers.js';
import { issuanceLogging } from './issuance-logging.js';

// The static proxy config (docs/architecture.md, "Static proxy"): rendered
// from settings only, so attaching, removing or moving a route never loads
// Caddy again (Caddy 2.6.2 closes every proxied WebSocket on any load). Which
// routes exist is one folder per route (its answerer name: the domain, or up
// to three path segments and the domain) that Caddy's `file` matchers check
// per request, deepest prefix first, so a path no route covers is Caddy's own
// no-route; where a request goes is a lookup of that name against the
// answerer (the address set and port its folder names, else SRV: LOOKUP_SRV),
// re-asked once the cached answer is older than `refresh`. No route is ever
// rendered into it.

export interface StaticRenderOptions extends RenderOptions {
  /** `udp/host:port` of the answerer, as Caddy dials it. */
  answerer: string;
  /** How long Caddy keeps an SRV answer before it asks again (`refresh`). */
  lookupRefreshMs: number;
  /** Folder holding the name lists (static-answers.ts NAME_LISTS), as Caddy sees it. */
  answersDir: string;
  /** Loopback port of the server answering on-demand TLS's `ask` (tls auto only). */
  askPort: number;
  /** tls auto: `acme` (ACME, the default) or `internal` (Caddy's own CA; tests, private names). */
  issuer: 'acme' | 'internal';
  /** tls auto: the issuance log Caddy writes (issuance-logging.ts), as Caddy sees the path; absent: none. */
  issuanceLog?: string | null;
  /**
   * tls auto, certificates.share: HTTP-01 challenges for a domain another node issues are forwarded to it, and
   * the ACME issuer uses HTTP-01 only (a TLS-ALPN-01 validation reaching a node that did not order cannot pass,
   * and each failed validation counts against the CA's limits). Turning it on costs one load.
   */
  shareCertificates?: boolean;
}

export interface StaticRendered {
  id: string;
  json: string;
  file: Buffer;
}

/** `@id` prefix of the static config's catch-all route: tells it apart from a per-route config. */
export const STATIC_ID_PREFIX = 'tether-static-';

/** Set on a forwarded ACME challenge: a node never forwards one again (two nodes naming each other the issuer). */
export const CHALLENGE_FORWARDED_HEADER = 'X-Tether-Challenge-Forwarded';

/** Header on every answer Caddy makes itself, so one is never taken for the app's. */
export const PROXY_HEADER = 'X-Tether-Proxy';

const mark = (value: 'no-route' | 'no-upstream') => ({ handler: 'headers', response: { set: { [PROXY_HEADER]: [value] } } });

function srvSource(name: string, o: StaticRenderOptions) {
  return { source: 'srv', name, refresh: `${o.lookupRefreshMs}ms`, resolver: { addresses: [o.answerer] } };
}

/** `vars_regexp` capture of a route's lookup file (LOOKUP_SRV): `{http.regexp.tether_set.1}` the port, `.2` the address set. */
const SET_CAPTURE = 'tether_set';

/** The SRV owner of the route a request would take at `depth` path segments (0: its host): staticRouteName in placeholders. */
function routeName(depth: number): string {
  const segments = Array.from({ length: depth }, (_, i) => `_{http.request.uri.path.${depth - 1 - i}}.`).join('');
  return `${segments}{http.request.host}`;
}

/**
 * A dial that fails (a replica gone since Caddy's lookup: a crashed container, another node's endpoint that stopped
 * answering before the probe noticed) is given up after DIAL_TIMEOUT and tried again on the next target within the
 * same request, for TRY_DURATION at most (more than one dial timeout and one interval, so a dead target costs one
 * retry). Caddy 2.6.2 keeps no health of dynamic upstreams: the answers (local first, probed remote endpoints) are
 * the health mechanism, this is what covers their refresh window. Short on purpose: a route with no upstream at all
 * is retried for the whole duration too before its 502 (1.5 s made the route probes of a stopped service, and its
 * visitors, wait that long); a TCP connect on a private network takes well under a millisecond, so 500 ms is a dead peer.
 */
export const UPSTREAM_RETRY = Object.freeze({ dialTimeoutMs: 500, tryIntervalMs: 100, tryDurationMs: 700 });

const ownerName = (depth: number) => `${routeName(depth)}.${HOSTS_LABEL}.${ANSWER_ZONE}`;

/**
 * Upstreams of the route named at `depths`: one source spread round robin, several tried in order (`first`).
 * `bySet`: the address set its lookup file names (`a` source, on the file's port), not its SRV records.
 */
function dynamicProxy(o: StaticRenderOptions, depths: readonly number[], bySet = false) {
  const source = (depth: number) => srvSource(ownerName(depth), o);
  const single = depths.length === 1;
  const r = UPSTREAM_RETRY;
  const captured = (n: number) => `{http.regexp.${SET_CAPTURE}.${n}}`;
  const upstreams = bySet
    ? { source: 'a', name: `${captured(2)}.${ADDRESSES_LABEL}.${ANSWER_ZONE}`, port: captured(1), refresh: `${ADDRESS_REFRESH_MS}ms`, resolver: { addresses: [o.answerer] } }
    : single
      ? source(depths[0]!)
      : { source: 'multi', sources: depths.map(source) };
  return {
    handler: 'reverse_proxy',
    dynamic_upstreams: upstreams,
    // The case-blind fallbacks need `first` (the deepest source that answered), which retries only the same target,
    // and each retry would repeat their uncached misses: no retries there.
    load_balancing: single
      ? { selection_policy: { policy: 'round_robin' }, try_duration: `${r.tryDurationMs}ms`, try_interval: `${r.tryIntervalMs}ms` }
      : { selection_policy: { policy: 'first' } },
    // SRV targets are names of the answerer's zone: Caddy resolves them through it too, not the system resolver.
    transport: { protocol: 'http', resolver: { addresses: [o.answerer] }, dial_timeout: `${r.dialTimeoutMs}ms` },
  };
}

function fileMatch(root: string, placeholder: string) {
  return { file: { root, try_files: [`/${placeholder}`] } };
}

/**
 * The route at `depth` exists when its lookups folder holds a file (never a temp file: those start with a dot);
 * the first in order is `<port>-<set>` when one port serves the route (LOOKUP_SRV), else `srv`.
 */
function lookupMatch(root: string, depth: number) {
  return { file: { root, try_files: [`/${routeName(depth)}/[0-9a-z]*`] } };
}

/** The route the lookup file at `depth` chose: its address set on its port, else by SRV. */
function routeProxy(o: StaticRenderOptions, depth: number) {
  const set = { vars_regexp: { '{http.matchers.file.relative}': { name: SET_CAPTURE, pattern: '^/[^/]+/([0-9]{1,5})-([0-9a-f]{16})$' } } };
  return {
    handler: 'subroute',
    routes: [
      { match: [set], handle: [dynamicProxy(o, [depth], true)], terminal: true },
      { handle: [dynamicProxy(o, [depth])] },
    ],
  };
}

/** A path whose first `depth` segments have the static shape (any case with `ci`), then `/` or its end. */
function segmentsRegexp(depth: number, ci: boolean) {
  const segment = ci ? '[A-Za-z0-9_-]{1,62}' : '[a-z0-9_-]{1,62}';
  return { path_regexp: { pattern: `^(?:/${segment}){${depth}}(?:/|$)` } };
}

/**
 * certificates.share: Caddy answers the challenges it ordered itself before any route runs (measured on 2.6.2);
 * one it does not know, for a domain another node issues (the `challenges` file), goes to that issuer (the SRV
 * name `<domain>.c` of the answerer), marked so it is never forwarded twice.
 */
function challengeRoutes(o: StaticRenderOptions, challenges: string) {
  const path = { path: ['/.well-known/acme-challenge/*'] };
  return [
    { match: [{ ...path, header: { [CHALLENGE_FORWARDED_HEADER]: ['*'] } }], handle: [mark('no-route'), { handler: 'static_response', status_code: 404 }], terminal: true },
    {
      match: [{ ...path, ...fileMatch(challenges, '{http.request.host}') }],
      handle: [
        {
          handler: 'reverse_proxy',
          dynamic_upstreams: srvSource(`{http.request.host}.${CHALLENGES_LABEL}.${ANSWER_ZONE}`, o),
          headers: { request: { set: { [CHALLENGE_FORWARDED_HEADER]: ['1'] } } },
          transport: { protocol: 'http', resolver: { addresses: [o.answerer] }, dial_timeout: `${UPSTREAM_RETRY.dialTimeoutMs}ms` },
        },
      ],
      terminal: true,
    },
  ];
}

const DEPTHS = Array.from({ length: STATIC_ROUTE_SHAPE.maxSegments }, (_, i) => STATIC_ROUTE_SHAPE.maxSegments - i);

function staticConfig(o: StaticRenderOptions, id: string | null) {
  const list = (name: NameList) => `${o.answersDir}/${name}`;
  const [domains, prefixed, lookups] = [list('domains'), list('prefixed'), list('lookups')];
  const upperHost = { '{http.request.host}': { pattern: '[A-Z]' } };
  const upperPath = { '{http.request.uri.path}': { pattern: '[A-Z]' } };
  // Caddy evaluates the matchers of one set in an order of its own (a map's), so a file check could run before the
  // cheap regexps that rule it out: each file check sits in a subroute behind the regexps that guard it, and a
  // request pays only the file checks of the depths its path has.
  const guarded = (match: unknown[], inner: unknown[]) => ({ match, handle: [{ handler: 'subroute', routes: inner }] });
  const routes: unknown[] = [
    // Host names and path segments match without case, files do not: a request with an upper-case Host, or an
    // upper-case path on a domain with prefix routes, takes the lookups alone, deepest first (the answerer's
    // DNS names are case-blind), each miss one uncached query. Its unknown names answer no-upstream, not no-route.
    guarded(
      [{ vars_regexp: upperHost }, { vars_regexp: upperPath }],
      [
        ...DEPTHS.map((depth) => ({
          match: [
            { vars_regexp: upperHost, ...segmentsRegexp(depth, true) },
            { ...fileMatch(prefixed, '{http.request.host}'), vars_regexp: upperPath, ...segmentsRegexp(depth, true) },
          ],
          handle: [dynamicProxy(o, [...DEPTHS.filter((d) => d <= depth), 0])],
          terminal: true,
        })),
        { match: [{ vars_regexp: upperHost }], handle: [dynamicProxy(o, [0])], terminal: true },
      ],
    ),
    // The deepest prefix with a route of its own wins: one file check per depth, one lookup; `/api` is a
    // segment, so `/apix` tries the file of `apix` and never the route of `/api`. No prefix: the whole domain.
    ...DEPTHS.map((depth) => guarded([segmentsRegexp(depth, false)], [{ match: [lookupMatch(lookups, depth)], handle: [routeProxy(o, depth)] }])),
    { match: [lookupMatch(lookups, 0)], handle: [routeProxy(o, 0)], terminal: true },
    {
      ...(id === null ? {} : { '@id': id }),
      handle: [mark('no-route'), { handler: 'static_response', status_code: 404, body: 'no such app\n' }],
    },
  ];
  const server: Record<string, unknown> = {
    listen: [o.tls === 'auto' ? `:${o.httpsPort}` : `:${o.httpPort}`],
    routes,
    // A route whose lookup found nothing or whose upstream refused: Caddy's own answer, marked.
    errors: { routes: [{ handle: [mark('no-upstream'), { handler: 'static_response', status_code: '{http.error.status_code}', body: 'no upstream\n' }] }] },
  };
  const servers: Record<string, unknown> = { [SERVER_NAME]: server };
  const apps: Record<string, unknown> = {};
  if (o.tls === 'off') {
    server.automatic_https = { disable: true };
  } else {
    // No host names in the config, so Caddy makes no redirects of its own: the HTTP server does it.
    server.automatic_https = { disable_redirects: true };
    server.tls_connection_policies = [{}];
    servers['tether-http'] = {
      listen: [`:${o.httpPort}`],
      automatic_https: { disable: true },
      routes: [
        ...(o.shareCertificates ? challengeRoutes(o, list('challenges')) : []),
        { handle: [{ handler: 'static_response', status_code: 308, headers: { Location: ['https://{http.request.host}{http.request.uri}'] } }] },
      ],
    };
    servers['tether-ask'] = {
      listen: [`127.0.0.1:${o.askPort}`],
      automatic_https: { disable: true },
      routes: [
        { match: [fileMatch(domains, '{http.request.uri.query.domain}')], handle: [{ handler: 'static_response', status_code: 200 }], terminal: true },
        { handle: [{ handler: 'static_response', status_code: 404 }] },
      ],
    };
    const issuer = o.issuer === 'internal' ? { module: 'internal' } : { ...acmeIssuer(o), ...(o.shareCertificates ? { challenges: { 'tls-alpn': { disabled: true } } } : {}) };
    // Caddy's own CA must never write itself into the host's trust store (2.6 tries by default).
    if (o.issuer === 'internal') apps.pki = { certificate_authorities: { local: { install_trust: false } } };
    apps.tls = {
      automation: {
        policies: [{ issuers: [issuer], on_demand: true }],
        on_demand: { ask: `http://127.0.0.1:${o.askPort}/ask` },
      },
    };
  }
  if (o.canary) {
    servers[CANARY_SERVER_NAME] = {
      listen: [o.canary.listen],
      automatic_https: { disable: true },
      routes: [
        // Looked up like every customer route: an answerer outage reaches the canary as it reaches customers.
        {
          match: [{ host: [CANARY_HOST] }],
          handle: [{ ...dynamicProxy(o, [0]), dynamic_upstreams: srvSource(`${CANARY_HOST}.${HOSTS_LABEL}.${ANSWER_ZONE}`, o) }],
          terminal: true,
        },
        { handle: [{ handler: 'static_response', status_code: 404 }] },
      ],
    };
  }
  apps.http = { http_port: o.httpPort, https_port: o.httpsPort, servers };
  const admin: Record<string, unknown> = { listen: o.admin.listen };
  if (o.admin.origins) admin.origins = [...o.admin.origins];
  return { admin, apps, ...(o.tls === 'auto' && o.issuanceLog ? { logging: issuanceLogging(o.issuanceLog) } : {}) };
}

/** Renders the static config: from settings only. */
export function renderStaticConfig(o: StaticRenderOptions): StaticRendered {
  const withoutId = canonicalJson(staticConfig(o, null));
  const id = `${STATIC_ID_PREFIX}${createHash('sha256').update(withoutId).digest('hex').slice(0, 32)}`;
  const json = canonicalJson(staticConfig(o, id));
  return { id, json, file: Buffer.from(`${json}\n`, 'utf8') };
}
