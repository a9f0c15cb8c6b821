import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { request } from 'undici';
import { canonicalRoutes, routingHash, type Route } from '@tether/protocol';

// What an agent of the per-route config (the routing mode before the static
// proxy became the only one) left behind: Caddy running one route per map
// entry with the config's `@id` (`tether-map-…`) on its catch-all, the same
// config in TETHER_STATE_DIR/caddy.json, and routing-state.json with the
// routes in place and one `initial` reload. Written by hand from that
// release's shapes, since its renderer is gone from the agent (a minimal copy
// lives in bench/per-route-baseline.ts as the benchmark's baseline).

export interface PerRouteState {
  stateDir: string;
  /** Where the old agent reached Caddy's admin API (http://… or unix:///…). */
  adminUrl: string;
  /** The admin listen address the old config kept. */
  adminListen: string;
  adminOrigins?: string[];
  /** Port of Caddy's customer-facing HTTP server (inside the container in container mode). */
  httpPort: number;
  routes: Route[];
}

function perRouteConfig(o: PerRouteState) {
  const routes = canonicalRoutes(o.routes).map((r) => ({
    match: [{ host: [r.domain], ...(r.pathPrefix === null ? {} : { path: [r.pathPrefix, `${r.pathPrefix}/*`] }) }],
    handle: [{ handler: 'reverse_proxy', upstreams: [{ dial: r.upstream }] }],
    terminal: true,
  }));
  return {
    admin: { listen: o.adminListen, ...(o.adminOrigins ? { origins: o.adminOrigins } : {}) },
    apps: {
      http: {
        http_port: o.httpPort,
        https_port: 443,
        servers: {
          tether: {
            listen: [`:${o.httpPort}`],
            automatic_https: { disable: true },
            routes: [...routes, { '@id': 'tether-map-0123456789abcdef0123456789abcdef', handle: [{ handler: 'static_response', status_code: 404 }] }],
          },
        },
      },
    },
  };
}

/** Loads the per-route config into Caddy and writes the old agent's state files. */
export async function installPerRouteState(o: PerRouteState): Promise<void> {
  const json = JSON.stringify(perRouteConfig(o));
  const unix = o.adminUrl.startsWith('unix://') ? o.adminUrl.slice('unix://'.length) : null;
  const res = await request(unix ? 'http://localhost/load' : `${o.adminUrl}/load`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(unix ? { host: 'localhost' } : {}) },
    body: json,
    ...(unix ? { dispatcher: new (await import('undici')).Agent({ connect: { socketPath: unix } }) } : {}),
  });
  const body = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`per-route config refused: ${res.statusCode} ${body}`);
  await writeFile(path.join(o.stateDir, 'caddy.json'), `${json}\n`);
  const ordered = canonicalRoutes(o.routes);
  const at = new Date().toISOString();
  await writeFile(
    path.join(o.stateDir, 'routing-state.json'),
    `${JSON.stringify({
      version: 1,
      appliedHash: routingHash(ordered),
      appliedRoutes: ordered,
      reloadsTotal: 1,
      reloadsDay: at.slice(0, 10),
      reloadsToday: 1,
      lastReloadAt: at,
      lastReloadReason: `added ${ordered.map((r) => r.domain).join(', ')}`,
      reloadKinds: { initial: 1, repairEmpty: 0, change: 0, repairDrift: 0 },
      renderDigest: '0123456789abcdef0123456789abcdef',
    })}\n`,
  );
}
