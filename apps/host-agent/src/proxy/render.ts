import { createHash } from 'node:crypto';
import { RESERVED_HOST_SUFFIX, canonicalRoutes, routingHash, type Route } from '@tether/protocol';
import { canonicalJson } from './canonical-json.js';
import { assertRenderableRoutes } from './route-validation.js';

// Routing map → Caddy JSON. Pure and deterministic: the same set of routes, in
// any order, gives the same bytes, because the compare-before-act rule (and so
// the number of reloads, and so every customer's WebSockets) depends on it.
// Only domain, path prefix and upstream reach the config; the upstream is the
// service's stable network alias, so a redeploy renders the same bytes.

export interface CaddyAdminSettings {
  /** Caddy's admin listen address. Kept in every config so a load never moves the admin API. */
  listen: string;
  /** Allowed Host values. Caddy 2.6 answers 403 on a unix-socket admin without them. */
  origins?: string[];
}

export type ProxyTlsMode = 'auto' | 'off';

export interface RenderOptions {
  admin: CaddyAdminSettings;
  /** Port Caddy serves plain HTTP on (inside the container in container mode). */
  httpPort: number;
  /** Port Caddy serves HTTPS on when tls is auto. */
  httpsPort: number;
  /** auto: Caddy's automatic HTTPS for every domain (certificates + HTTP→HTTPS redirect); off: plain HTTP only. */
  tls: ProxyTlsMode;
  /** Contact address for the ACME account (tls auto only). */
  acmeEmail?: string | null;
  /** The ACME CA's directory URL (tls auto, issuer acme); absent: Caddy's default (Let's Encrypt, ZeroSSL). */
  acmeCa?: string | null;
  /** PEM file of the root that signs the ACME CA's own HTTPS certificate, trusted for talking to it (a private CA). */
  acmeCaRoot?: string | null;
  /** The canary's own server (see canary/): absent when the canary is off. */
  canary?: CanaryServerSettings | null;
}

/** Caddy's ACME issuer with the operator's account address and CA (absent: Caddy's defaults). */
export function acmeIssuer(o: Pick<RenderOptions, 'acmeEmail' | 'acmeCa' | 'acmeCaRoot'>): Record<string, unknown> {
  return {
    module: 'acme',
    ...(o.acmeEmail ? { email: o.acmeEmail } : {}),
    ...(o.acmeCa ? { ca: o.acmeCa } : {}),
    ...(o.acmeCaRoot ? { trusted_roots_pem_files: [o.acmeCaRoot] } : {}),
  };
}

/** The host the canary's requests name on the canary server. */
export const CANARY_HOST = `canary.${RESERVED_HOST_SUFFIX}`;
export const CANARY_SERVER_NAME = 'tether-canary';

export interface CanaryServerSettings {
  /** Caddy's listen address for the canary server (`127.0.0.1:9080` external, `:9080` in the container). */
  listen: string;
  /** `host:port` Caddy dials to reach the agent's canary endpoint. */
  upstream: string;
}

export interface RenderedConfig {
  /** routingHash of the routes rendered. */
  hash: string;
  /** The `@id` of the config's catch-all route (configId). */
  id: string;
  /** Canonical JSON (sorted keys, no whitespace): what Caddy's config must canonicalise to. */
  json: string;
  /** The bytes of the config file: json and a newline. */
  file: Buffer;
}

export const SERVER_NAME = 'tether';

/** Bumped whenever the renderer's output for the same routes and settings changes. */
const RENDER_VERSION = 2;

/**
 * Digest of what, besides the routes, decides the rendered config: the
 * settings and the renderer's version. Kept with the routes in place, so a
 * reload caused by new settings (or a new agent) is a `change`, not drift.
 */
export function renderDigest(options: RenderOptions): string {
  return createHash('sha256').update(`${RENDER_VERSION}\n${canonicalJson(options)}`).digest('hex').slice(0, 32);
}

/** Prefix of the `@id` that names the rendered config (see configId). */
export const CONFIG_ID_PREFIX = 'tether-map-';

/**
 * The identity of a rendered config, carried as the `@id` of its small final
 * catch-all route. Caddy serves `GET /id/<id>` for an object with that `@id`
 * in about 1 ms whatever the config's size (404 when absent), so a no-op push
 * asks only that instead of reading and comparing the whole config (86 ms at
 * 10,000 routes). The id is a digest of the config rendered without it: it
 * covers every render setting (ports, TLS, admin, canary) and only what
 * reaches Caddy, so two maps that render the same bytes (other service ids,
 * same upstream aliases) keep the same id and never cause a reload. On the
 * catch-all route, not the server: an `@id` on the server would make Caddy
 * serialise every route again.
 */
function configId(withoutId: string): string {
  return `${CONFIG_ID_PREFIX}${createHash('sha256').update(withoutId).digest('hex').slice(0, 32)}`;
}

const notFound = (id: string | null) => ({ ...(id === null ? {} : { '@id': id }), handle: [{ handler: 'static_response', status_code: 404 }] });

/** Paths a prefix covers: "/api" matches /api and /api/…, never /apix. */
function prefixPatterns(prefix: string): string[] {
  return prefix.endsWith('/') ? [`${prefix}*`] : [prefix, `${prefix}/*`];
}

export function caddyRoute(route: Route) {
  const match: Record<string, string[]> = { host: [route.domain] };
  if (route.pathPrefix !== null) match.path = prefixPatterns(route.pathPrefix);
  return {
    match: [match],
    handle: [{ handler: 'reverse_proxy', upstreams: [{ dial: route.upstream }] }],
    terminal: true,
  };
}

function caddyConfig(routes: Route[], options: RenderOptions, id: string | null) {
  const server: Record<string, unknown> = {
    listen: [options.tls === 'auto' ? `:${options.httpsPort}` : `:${options.httpPort}`],
    // canonicalRoutes orders by domain, then longest path prefix first, the
    // whole-domain route last: the first matching route is the most specific.
    // A request no route matches (unknown host, uncovered path) gets 404, not
    // Caddy's default empty 200.
    routes: [...routes.map(caddyRoute), notFound(id)],
  };
  if (options.tls === 'off') server.automatic_https = { disable: true };
  const admin: Record<string, unknown> = { listen: options.admin.listen };
  if (options.admin.origins) admin.origins = [...options.admin.origins];
  const servers: Record<string, unknown> = { [SERVER_NAME]: server };
  if (options.canary) {
    // Its own server: its own port, plain HTTP, never a certificate, and nothing a customer route can reach.
    servers[CANARY_SERVER_NAME] = {
      listen: [options.canary.listen],
      automatic_https: { disable: true },
      routes: [
        { match: [{ host: [CANARY_HOST] }], handle: [{ handler: 'reverse_proxy', upstreams: [{ dial: options.canary.upstream }] }], terminal: true },
        { handle: [{ handler: 'static_response', status_code: 404 }] },
      ],
    };
  }
  const apps: Record<string, unknown> = {
    http: { http_port: options.httpPort, https_port: options.httpsPort, servers },
  };
  if (options.tls === 'auto' && (options.acmeEmail || options.acmeCa)) {
    apps.tls = { automation: { policies: [{ issuers: [acmeIssuer(options)] }] } };
  }
  return { admin, apps };
}

/** Renders a routing map; throws PROXY_INVALID_ROUTE for a route that cannot be expressed safely. */
export function renderCaddyConfig(routes: readonly Route[], options: RenderOptions): RenderedConfig {
  const ordered = canonicalRoutes(routes);
  assertRenderableRoutes(ordered);
  // Built as objects and serialised once: no string is ever spliced into JSON text.
  const hash = routingHash(ordered);
  // Rendered twice (without, then with its id): only on a real change, the no-op path never renders.
  const id = configId(canonicalJson(caddyConfig(ordered, options, null)));
  const json = canonicalJson(caddyConfig(ordered, options, id));
  return { hash, id, json, file: Buffer.from(`${json}\n`, 'utf8') };
}

/** The config a freshly started Caddy holds: only its admin API (what the container image boots with). */
export function renderBootstrapConfig(admin: CaddyAdminSettings): string {
  return canonicalJson({ admin: admin.origins ? { listen: admin.listen, origins: admin.origins } : { listen: admin.listen } });
}
