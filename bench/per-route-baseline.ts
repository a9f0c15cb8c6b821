import { canonicalRoutes, type Route } from '@tether/protocol';
import { createCaddyAdmin } from '../apps/host-agent/src/proxy/index.js';

// The baseline proxy-routes.ts measures the static proxy against: the per-route
// Caddy config older agents rendered (one host matcher per route, most specific
// path prefix first, a 404 catch-all), loaded once. Kept here only: the agent
// no longer renders routes into Caddy's config (docs/architecture.md, "Static
// proxy"). Plain HTTP, the operator's Caddy on `adminUrl`.

export interface PerRouteBaselineOptions {
  adminUrl: string;
  adminTimeoutMs: number;
  serving: { httpPort: number };
}

function prefixPatterns(prefix: string): string[] {
  return prefix.endsWith('/') ? [`${prefix}*`] : [prefix, `${prefix}/*`];
}

export function renderPerRouteConfig(routes: readonly Route[], o: { adminListen: string; httpPort: number }): string {
  const caddyRoutes = canonicalRoutes(routes).map((r) => ({
    match: [{ host: [r.domain], ...(r.pathPrefix === null ? {} : { path: prefixPatterns(r.pathPrefix) }) }],
    handle: [{ handler: 'reverse_proxy', upstreams: [{ dial: r.upstream }] }],
    terminal: true,
  }));
  const server = { listen: [`:${o.httpPort}`], automatic_https: { disable: true }, routes: [...caddyRoutes, { handle: [{ handler: 'static_response', status_code: 404 }] }] };
  return JSON.stringify({ admin: { listen: o.adminListen }, apps: { http: { http_port: o.httpPort, servers: { tether: server } } } });
}

/** Loads the per-route config of each applied map into Caddy (the whole map, one load). */
export function perRouteBaseline(o: PerRouteBaselineOptions) {
  const admin = createCaddyAdmin({ adminUrl: o.adminUrl, timeoutMs: o.adminTimeoutMs });
  const url = new URL(o.adminUrl);
  const adminListen = `${url.hostname}:${url.port}`;
  return {
    start: () => Promise.resolve(),
    async apply(map: { routes: Route[] }): Promise<void> {
      await admin.load(renderPerRouteConfig(map.routes, { adminListen, httpPort: o.serving.httpPort }));
    },
    stop: () => admin.close(),
  };
}
