import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';
import { CANARY_HOST, CANARY_SERVER_NAME, SERVER_NAME, acmeIssuer, type RenderOptions } from './render.js';
import { ANSWER_ZONE, HOSTS_LABEL, type NameList } from './static-answers.js';
import { issuanceLogging } from './issuance-logging.js';

// The static proxy config (docs/architecture.md, "Static proxy"): rendered
// from settings only, so attaching, removing or moving a route never loads
// Caddy again (Caddy 2.6.2 closes every proxied WebSocket on any load). Which
// routes exist is one empty file per whole domain and per (first segment,
// domain) that Caddy's `file` matcher checks per request, so a path no route
// covers is Caddy's own no-route; where a request goes is an SRV lookup of
// its host (or first segment) against the answerer, re-asked once the cached
// answer is older than `refresh`. No route is ever rendered into it.

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
}

export interface StaticRendered {
  id: string;
  json: string;
  file: Buffer;
}

/** `@id` prefix of the static config's catch-all route: tells it apart from a per-route config. */
export const STATIC_ID_PREFIX = 'tether-static-';

/** Header on every answer Caddy makes itself, so one is never taken for the app's. */
export const PROXY_HEADER = 'X-Tether-Proxy';

const mark = (value: 'no-route' | 'no-upstream') => ({ handler: 'headers', response: { set: { [PROXY_HEADER]: [value] } } });

function srvSource(name: string, o: StaticRenderOptions) {
  return { source: 'srv', name, refresh: `${o.lookupRefreshMs}ms`, resolver: { addresses: [o.answerer] } };
}

/** Which SRV names a request looks up: its host's, its first segment's, or the segment's with the host's as the fallback. */
type Lookup = 'host' | 'prefix' | 'prefix-then-host';

function dynamicProxy(o: StaticRenderOptions, lookup: Lookup) {
  const host = `{http.request.host}.${HOSTS_LABEL}.${ANSWER_ZONE}`;
  const prefix = `_p{http.request.uri.path.0}.${host}`;
  const upstreams =
    lookup === 'prefix-then-host'
      ? // The `first` policy picks the first that answered: the segment's service, else the domain's.
        { source: 'multi', sources: [srvSource(prefix, o), srvSource(host, o)] }
      : srvSource(lookup === 'prefix' ? prefix : host, o);
  return {
    handler: 'reverse_proxy',
    dynamic_upstreams: upstreams,
    load_balancing: { selection_policy: { policy: 'first' } },
    // SRV targets are names of the answerer's zone: Caddy resolves them through it too, not the system resolver.
    transport: { protocol: 'http', resolver: { addresses: [o.answerer] } },
  };
}

function fileMatch(root: string, placeholder: string) {
  return { file: { root, try_files: [`/${placeholder}`] } };
}

function staticConfig(o: StaticRenderOptions, id: string | null) {
  const list = (name: NameList) => `${o.answersDir}/${name}`;
  const [domains, whole, prefixed, prefixes] = [list('domains'), list('whole'), list('prefixed'), list('prefixes')];
  const upperHost = { vars_regexp: { '{http.request.host}': { pattern: '[A-Z]' } } };
  const routes: unknown[] = [
    // Host names and Caddy's path matcher compare without case, files do not: a request with an upper-case
    // Host, or an upper-case first segment on a domain with prefix routes, takes the lookups alone (the
    // answerer's DNS names are case-blind). Its unknown names answer no-upstream instead of no-route.
    {
      match: [
        { ...upperHost, path_regexp: { pattern: '^/[A-Za-z0-9-]{1,62}(/|$)' } },
        { ...fileMatch(prefixed, '{http.request.host}'), path_regexp: { pattern: '^/[A-Za-z0-9-]*[A-Z][A-Za-z0-9-]*(/|$)' } },
      ],
      handle: [dynamicProxy(o, 'prefix-then-host')],
      terminal: true,
    },
    { match: [upperHost], handle: [dynamicProxy(o, 'host')], terminal: true },
    {
      // A first segment with a route of its own: one lookup; any other path falls through to the whole domain.
      match: [{ ...fileMatch(prefixes, '{http.request.uri.path.0}@{http.request.host}'), path_regexp: { pattern: '^/[a-z0-9-]{1,62}(/|$)' } }],
      handle: [dynamicProxy(o, 'prefix')],
      terminal: true,
    },
    { match: [fileMatch(whole, '{http.request.host}')], handle: [dynamicProxy(o, 'host')], terminal: true },
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
      routes: [{ handle: [{ handler: 'static_response', status_code: 308, headers: { Location: ['https://{http.request.host}{http.request.uri}'] } }] }],
    };
    servers['tether-ask'] = {
      listen: [`127.0.0.1:${o.askPort}`],
      automatic_https: { disable: true },
      routes: [
        { match: [fileMatch(domains, '{http.request.uri.query.domain}')], handle: [{ handler: 'static_response', status_code: 200 }], terminal: true },
        { handle: [{ handler: 'static_response', status_code: 404 }] },
      ],
    };
    const issuer = o.issuer === 'internal' ? { module: 'internal' } : acmeIssuer(o);
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
          handle: [{ ...dynamicProxy(o, 'host'), dynamic_upstreams: srvSource(`${CANARY_HOST}.${HOSTS_LABEL}.${ANSWER_ZONE}`, o) }],
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
