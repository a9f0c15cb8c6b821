// What proxy-routes.ts and proxy-miss-cost.ts share: one Caddy 2.6, one knotd,
// one loopback upstream, N domains (and a `/api` prefix on every tenth), the
// agent's own static routing controller, and timed sequential GETs.
import { execFile } from 'node:child_process';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { routingHash, type Route } from '@tether/protocol';
import { freePort, startCaddy, type TestCaddy } from '@tether/testkit';
import { createCaddyAdmin, KnotAnswerer, StaticRoutingController } from '../apps/host-agent/src/proxy/index.js';

export const quietLogger = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } as never;

export function get(port: number, host: string, via: http.Agent, p = '/'): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, headers: { host }, agent: via }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

export function pct(samples: readonly number[]) {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] as number;
  return { p50: at(0.5), p99: at(0.99) };
}

/** One timed GET. */
export async function timed(port: number, host: string, via: http.Agent): Promise<{ ms: number; ok: boolean }> {
  const started = performance.now();
  const status = await get(port, host, via);
  return { ms: performance.now() - started, ok: status === 200 };
}

export async function sequential(port: number, names: readonly string[], n: number, via: http.Agent): Promise<{ p50: number; p99: number; errors: number }> {
  const times: number[] = [];
  let errors = 0;
  for (let i = 0; i < n; i += 1) {
    const t = await timed(port, names[i % names.length] as string, via);
    if (!t.ok) errors += 1;
    times.push(t.ms);
  }
  return { ...pct(times), errors };
}

export interface Rig {
  caddy: TestCaddy;
  knotPort: number;
  /** The zone file knotd serves. */
  zonePath: string;
  upstreamPort: number;
  routes: Route[];
  map: { version: number; hash: string; routes: Route[] };
  /** Hosts of the whole-domain routes, `app-<i>.bench.example.com`. */
  names: string[];
  /** Queries knotd answered since it started, by type (its mod-stats counters: knot-files.ts). */
  lookups(): Promise<Record<string, number>>;
  /** Applies the map through a static controller whose Caddy asks `answerer` (`udp/host:port`); its Caddy loads. */
  startStatic(answerer: string, o?: { lookupRefreshMs?: number }): Promise<{ loads(): number; stop(): Promise<void> }>;
  close(): Promise<void>;
}

export async function startRig(domains: number): Promise<Rig> {
  // Each service at an address of its own (127.1.x.y on loopback), as each service's containers are: routes to
  // one address would share one address set, one lookup for all of them (static-answers.ts LOOKUP_SRV).
  const upstream = http.createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => upstream.listen(0, '0.0.0.0', resolve));
  const upstreamPort = (upstream.address() as { port: number }).port;
  const at = (n: number) => `127.${1 + (n >> 16)}.${(n >> 8) & 255}.${n & 255}:${upstreamPort}`;
  const routes: Route[] = Array.from({ length: domains }, (_, i) => ({ domain: `app-${i}.bench.example.com`, pathPrefix: null, serviceId: `svc_${i}`, upstream: at(i + 1) }));
  for (let i = 0; i < domains; i += 10) routes.push({ domain: `app-${i}.bench.example.com`, pathPrefix: '/api', serviceId: `api_${i}`, upstream: at(domains + i + 1) });
  const map = { version: 1, hash: routingHash(routes), routes };
  const caddy = await startCaddy();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-bench-static-'));
  const knotPort = await freePort();
  const answerer = new KnotAnswerer({ dir: path.join(dir, 'answerer'), listen: { host: '127.0.0.1', port: knotPort }, knotd: 'knotd', knotc: 'knotc', probeTimeoutMs: 500, logger: quietLogger });
  let runs = 0;
  return {
    caddy,
    knotPort,
    zonePath: answerer.zonePath,
    upstreamPort,
    routes,
    map,
    names: routes.filter((r) => r.pathPrefix === null).map((r) => r.domain),
    async lookups() {
      const { stdout } = await promisify(execFile)('knotc', ['-s', answerer.paths.socket, 'stats', 'mod-stats']);
      const counts: Record<string, number> = {};
      for (const [, type, n] of stdout.matchAll(/query-type\[(\w+)\] = (\d+)/g)) counts[type as string] = Number(n);
      return counts;
    },
    async startStatic(address, o = {}) {
      const stateDir = path.join(dir, `static-${(runs += 1)}`);
      const controller = new StaticRoutingController({
        proxy: createCaddyAdmin({ adminUrl: caddy.adminUrl, timeoutMs: 60_000 }),
        render: {
          admin: { listen: `127.0.0.1:${caddy.adminPort}` },
          httpPort: caddy.httpPort,
          httpsPort: 443,
          tls: 'off',
          answerer: address,
          lookupRefreshMs: o.lookupRefreshMs ?? 1_000,
          answersDir: path.join(stateDir, 'answers'),
          askPort: await freePort(),
          issuer: 'internal',
        },
        answerer,
        endpoints: () => Promise.resolve(new Map()),
        configPath: path.join(stateDir, 'caddy.json'),
        statePath: path.join(stateDir, 'routing-state.json'),
        checkIntervalMs: 0,
        answersIntervalMs: 0,
        logger: quietLogger,
      });
      await controller.start();
      const applied = await controller.apply(map);
      if (applied.error) throw new Error(applied.error);
      return { loads: () => controller.adminCalls.loads, stop: () => controller.stop() };
    },
    async close() {
      await answerer.destroy();
      await caddy.stop();
      upstream.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
