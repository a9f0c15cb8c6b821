import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { serviceUpstream, type Route } from '@tether/protocol';
import { canonicalJson, matchesCanonicalJson } from '../../src/proxy/canonical-json.js';
import { CADDY_CONTAINER_ADMIN, ProxyError, renderBootstrapConfig, renderCaddyConfig, type RenderOptions } from '../../src/proxy/index.js';
import { route } from './helpers/harness.js';

const options: RenderOptions = { admin: { listen: '127.0.0.1:2019' }, httpPort: 8080, httpsPort: 8443, tls: 'off' };

const routes: Route[] = [
  route('shop.example.com', serviceUpstream('svc_shop', 8080)),
  route('shop.example.com', serviceUpstream('svc_api', 3000), '/api'),
  route('shop.example.com', serviceUpstream('svc_v2', 3001), '/api/v2'),
  route('blog.example.com', serviceUpstream('svc_blog', 80)),
  route('docs.example.com', serviceUpstream('svc_docs', 80), '/guide/'),
];

function shuffled<T>(items: T[], seed: number): T[] {
  const out = [...items];
  let s = seed;
  for (let i = out.length - 1; i > 0; i -= 1) {
    s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

type RenderedRoute = { match: Array<{ host: string[]; path?: string[] }>; handle: Array<Record<string, unknown>>; terminal?: boolean };
const serverRoutes = (json: string) => (JSON.parse(json) as { apps: { http: { servers: { tether: { routes: RenderedRoute[] } } } } }).apps.http.servers.tether.routes;

describe('renderCaddyConfig', () => {
  it('gives the same bytes for the same routes in any order and with any key order', () => {
    const reference = renderCaddyConfig(routes, options);
    for (let seed = 1; seed <= 50; seed += 1) {
      const again = shuffled(routes, seed).map((r) => ({ upstream: r.upstream, serviceId: r.serviceId, pathPrefix: r.pathPrefix, domain: r.domain }));
      const rendered = renderCaddyConfig(again, options);
      expect(rendered.file.equals(reference.file)).toBe(true);
      expect(rendered.hash).toBe(reference.hash);
    }
    // Sorted keys, no whitespace, one trailing newline: nothing time- or order-dependent.
    expect(reference.file.toString()).toBe(`${reference.json}\n`);
    expect(reference.json).not.toMatch(/\d{4}-\d{2}-\d{2}T/);
  });

  it('renders only what reaches Caddy: a recomputed map with the same aliases, even other service ids, gives the same bytes', () => {
    const redeployed = routes.map((r) => ({ ...r, serviceId: `${r.serviceId}-recomputed` }));
    expect(renderCaddyConfig(redeployed, options).json).toBe(renderCaddyConfig(routes, options).json);
    const moved = routes.map((r, i) => (i === 0 ? { ...r, upstream: serviceUpstream('svc_shop', 8081) } : r));
    expect(renderCaddyConfig(moved, options).json).not.toBe(renderCaddyConfig(routes, options).json);
  });

  it('puts each domain behind a host matcher, longest path prefix first, the domain catch-all last, then a 404', () => {
    const rendered = serverRoutes(renderCaddyConfig(routes, options).json);
    const summary = rendered.map((r) => [r.match?.[0]?.host?.[0] ?? '*', r.match?.[0]?.path ?? null, (r.handle[0] as { handler: string }).handler]);
    expect(summary).toEqual([
      ['blog.example.com', null, 'reverse_proxy'],
      ['docs.example.com', ['/guide/*'], 'reverse_proxy'],
      ['shop.example.com', ['/api/v2', '/api/v2/*'], 'reverse_proxy'],
      ['shop.example.com', ['/api', '/api/*'], 'reverse_proxy'],
      ['shop.example.com', null, 'reverse_proxy'],
      ['*', null, 'static_response'],
    ]);
    expect(rendered[2]?.handle[0]).toEqual({ handler: 'reverse_proxy', upstreams: [{ dial: serviceUpstream('svc_v2', 3001) }] });
    expect(rendered.slice(0, -1).every((r) => r.terminal === true)).toBe(true);
  });

  it('names the config by an id that changes with every rendered byte and with nothing else', () => {
    const a = renderCaddyConfig([{ domain: 'a.example.com', pathPrefix: null, serviceId: 's1', upstream: 'svc-a:80' }], options);
    const sameBytes = renderCaddyConfig([{ domain: 'a.example.com', pathPrefix: null, serviceId: 'other', upstream: 'svc-a:80' }], options);
    const otherUpstream = renderCaddyConfig([{ domain: 'a.example.com', pathPrefix: null, serviceId: 's1', upstream: 'svc-b:80' }], options);
    const otherPort = renderCaddyConfig([{ domain: 'a.example.com', pathPrefix: null, serviceId: 's1', upstream: 'svc-a:80' }], { ...options, httpPort: 8081 });
    expect(sameBytes.id).toBe(a.id);
    expect(new Set([a.id, otherUpstream.id, otherPort.id]).size).toBe(3);
    // The id sits on the last (catch-all) route only, so GET /id/<id> returns that small object.
    expect(a.json.split(a.id)).toHaveLength(2);
    expect(JSON.parse(a.json).apps.http.servers.tether.routes.at(-1)['@id']).toBe(a.id);
  });

  it('renders the canary its own server (own listen, no automatic HTTPS, only the reserved host) when on, nothing when off', () => {
    const off = JSON.parse(renderCaddyConfig([], options).json);
    expect(Object.keys(off.apps.http.servers)).toEqual(['tether']);
    const on = JSON.parse(renderCaddyConfig([], { ...options, tls: 'auto', canary: { listen: '127.0.0.1:9080', upstream: '127.0.0.1:9081' } }).json);
    expect(on.apps.http.servers['tether-canary']).toEqual({
      listen: ['127.0.0.1:9080'],
      automatic_https: { disable: true },
      routes: [
        { match: [{ host: ['canary.tether.internal'] }], handle: [{ handler: 'reverse_proxy', upstreams: [{ dial: '127.0.0.1:9081' }] }], terminal: true },
        { handle: [{ handler: 'static_response', status_code: 404 }] },
      ],
    });
    // Turning the canary on is a new config (and a new id): one reload, counted as a change of settings.
    expect(renderCaddyConfig([], { ...options, canary: { listen: '127.0.0.1:9080', upstream: '127.0.0.1:9081' } }).id).not.toBe(renderCaddyConfig([], options).id);
  });

  it('renders an empty map as a valid server that answers 404 to everything', () => {
    const rendered = renderCaddyConfig([], options);
    const config = JSON.parse(rendered.json);
    expect(rendered.id).toMatch(/^tether-map-[0-9a-f]{32}$/);
    expect(config).toEqual({
      admin: { listen: '127.0.0.1:2019' },
      apps: {
        http: {
          http_port: 8080,
          https_port: 8443,
          servers: { tether: { automatic_https: { disable: true }, listen: [':8080'], routes: [{ '@id': rendered.id, handle: [{ handler: 'static_response', status_code: 404 }] }] } },
        },
      },
    });
  });

  it('keeps the admin listen address (and origins) in every config, so a load never moves the admin API', () => {
    const config = JSON.parse(renderCaddyConfig(routes, { ...options, admin: CADDY_CONTAINER_ADMIN }).json);
    expect(config.admin).toEqual({ listen: 'unix//run/tether-caddy/admin.sock', origins: ['localhost'] });
  });

  it('tls auto: serves HTTPS with automatic certificates (ACME contact when given); tls off disables it', () => {
    const auto = JSON.parse(renderCaddyConfig(routes, { ...options, tls: 'auto', acmeEmail: 'ops@example.com' }).json);
    expect(auto.apps.http.servers.tether.listen).toEqual([':8443']);
    expect(auto.apps.http.servers.tether.automatic_https).toBeUndefined();
    expect(auto.apps.tls.automation.policies).toEqual([{ issuers: [{ email: 'ops@example.com', module: 'acme' }] }]);
    const off = JSON.parse(renderCaddyConfig(routes, options).json);
    expect(off.apps.tls).toBeUndefined();
    expect(off.apps.http.servers.tether.automatic_https).toEqual({ disable: true });
  });

  it('refuses any domain, path prefix or upstream that could change the config beyond its own route', () => {
    const hostile: Array<[string, Partial<Route>]> = [
      ['json breakout in a domain', { domain: 'a.com"],"handle":[{"handler":"static_response"}],"x":["' }],
      ['placeholder in a domain', { domain: '{http.request.host}' }],
      ['wildcard domain', { domain: '*.example.com' }],
      ['upper case domain', { domain: 'Shop.example.com' }],
      ['newline in a domain', { domain: 'a.com\nb.com' }],
      ['glob in a path prefix', { pathPrefix: '/api*' }],
      ['placeholder in a path prefix', { pathPrefix: '/{http.request.uri}' }],
      ['relative path prefix', { pathPrefix: 'api' }],
      ['quote in a path prefix', { pathPrefix: '/a"b' }],
      ['placeholder in an upstream', { upstream: '{env.SECRET}:80' }],
      ['unix upstream', { upstream: 'unix//var/run/docker.sock' }],
      ['upstream without port', { upstream: 'svc-a' }],
      ['upstream port out of range', { upstream: 'svc-a:70000' }],
      ['upstream with a path', { upstream: 'svc-a:80/admin' }],
    ];
    for (const [what, change] of hostile) {
      const bad = { ...route('ok.example.com', 'svc-ok:80'), ...change };
      let caught: unknown;
      try {
        renderCaddyConfig([route('good.example.com', 'svc-good:80'), bad], options);
      } catch (error) {
        caught = error;
      }
      expect(caught, what).toBeInstanceOf(ProxyError);
      expect((caught as ProxyError).code, what).toBe('PROXY_INVALID_ROUTE');
    }
  });

  it('lets plain URL path characters through as data: one route per input route, nothing else', () => {
    const odd = [route('a.example.com', '127.0.0.1:80', "/it's;a=b&c,(d)@e:%20~"), route('b.example.com', '[::1]:8080')];
    const rendered = serverRoutes(renderCaddyConfig(odd, options).json);
    expect(rendered).toHaveLength(3);
    expect(rendered[0]?.match).toEqual([{ host: ['a.example.com'], path: ["/it's;a=b&c,(d)@e:%20~", "/it's;a=b&c,(d)@e:%20~/*"] }]);
    expect(rendered[1]?.handle).toEqual([{ handler: 'reverse_proxy', upstreams: [{ dial: '[::1]:8080' }] }]);
  });

  it('infra/caddy/bootstrap.json is exactly what the image is built with', () => {
    const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
    const file = readFileSync(path.join(repoRoot, 'infra/caddy/bootstrap.json'), 'utf8');
    expect(file).toBe(`${renderBootstrapConfig(CADDY_CONTAINER_ADMIN)}\n`);
  });
});

describe('canonical comparison with what Caddy reports', () => {
  it('treats key order, whitespace and Go-style escaping as the same config, and any value change as different', () => {
    const expected = renderCaddyConfig([route('a.example.com', '127.0.0.1:80', '/x&y')], options).json;
    const reverseKeys = (v: unknown): unknown =>
      Array.isArray(v) ? v.map(reverseKeys) : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, reverseKeys(x)])) : v;
    const reordered = JSON.stringify(reverseKeys(JSON.parse(expected)), null, 2);
    expect(reordered.startsWith('{\n  "apps"')).toBe(true);
    expect(matchesCanonicalJson(reordered, expected)).toBe(true);
    expect(matchesCanonicalJson(expected.replace('&', '\\u0026'), expected)).toBe(true);
    expect(matchesCanonicalJson(`${expected}\n`, expected)).toBe(true);
    expect(matchesCanonicalJson(expected.replace('/x\u0026y', '/x&z'), expected)).toBe(false);
    expect(matchesCanonicalJson('null', expected)).toBe(false);
    expect(matchesCanonicalJson('not json', expected)).toBe(false);
    expect(canonicalJson({ b: [{ d: 1, c: 2 }], a: { __proto__: 1 } })).toBe('{"a":{},"b":[{"c":2,"d":1}]}');
    expect(canonicalJson(JSON.parse('{"b":1,"__proto__":{"x":1}}'))).toBe('{"__proto__":{"x":1},"b":1}');
  });
});
