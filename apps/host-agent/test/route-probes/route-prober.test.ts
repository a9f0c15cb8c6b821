import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '@tether/testkit';
import { judge, probeRoute, RouteProber, type ProbeTarget } from '../../src/route-probes/index.js';
import { silentLogger } from '../proxy/helpers/harness.js';

// A real HTTP server stands in for the proxy: it answers by Host like Caddy
// would (the app's answer, a marked answer of its own, an unmarked 502), and
// records every probe it gets.

const seen: Array<{ host: string; path: string; probe: string | undefined; at: number }> = [];
let server: http.Server;
let target: ProbeTarget;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const host = req.headers.host ?? '';
    seen.push({ host, path: req.url ?? '', probe: req.headers['x-tether-probe'] as string | undefined, at: Date.now() });
    if (host === 'app.test') return res.writeHead(200).end('hello');
    if (host === 'redirect.test') return res.writeHead(404).end('app says not found');
    if (host === 'crash.test') return res.writeHead(500).end('app crashed');
    if (host === 'gone.test') return res.writeHead(502).end();
    if (host === 'busy.test') return res.writeHead(503).end('app says busy');
    if (host === 'silent.test') return; // never answers
    res.writeHead(404, { 'x-tether-proxy': 'no-route' }).end('no such app\n');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  target = { host: '127.0.0.1', port: (server.address() as AddressInfo).port, tls: false };
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe('judge', () => {
  it('serving only for an answer the app made below 500', () => {
    expect(judge(200, false)).toEqual({ state: 'serving', madeBy: 'app' });
    expect(judge(404, false)).toEqual({ state: 'serving', madeBy: 'app' });
    expect(judge(404, true)).toEqual({ state: 'failing', madeBy: 'proxy' });
    expect(judge(500, false)).toEqual({ state: 'failing', madeBy: 'app' });
    // The proxy marks its own answers: an unmarked 502-504 is the app's.
    expect(judge(503, false)).toEqual({ state: 'failing', madeBy: 'app' });
    expect(judge(502, false)).toEqual({ state: 'failing', madeBy: 'app' });
  });
});

describe('probeRoute', () => {
  it('sends the route host, its path and x-tether-probe, and judges who answered', async () => {
    const ok = await probeRoute(target, { domain: 'app.test', pathPrefix: '/api' }, 2_000);
    expect(ok).toMatchObject({ domain: 'app.test', pathPrefix: '/api', state: 'serving', madeBy: 'app', status: 200, error: null });
    expect(seen.at(-1)).toMatchObject({ host: 'app.test', path: '/api', probe: '1' });
    expect(await probeRoute(target, { domain: 'redirect.test', pathPrefix: null }, 2_000)).toMatchObject({ state: 'serving', status: 404, madeBy: 'app' });
    expect(seen.at(-1)?.path).toBe('/');
    expect(await probeRoute(target, { domain: 'unknown.test', pathPrefix: null }, 2_000)).toMatchObject({ state: 'failing', status: 404, madeBy: 'proxy' });
    expect(await probeRoute(target, { domain: 'crash.test', pathPrefix: null }, 2_000)).toMatchObject({ state: 'failing', status: 500, madeBy: 'app' });
    expect(await probeRoute(target, { domain: 'busy.test', pathPrefix: null }, 2_000)).toMatchObject({ state: 'failing', status: 503, madeBy: 'app' });
  });

  it('no answer: refused at once, a silent proxy at the timeout (not before, not long after)', async () => {
    const closed = await probeRoute({ ...target, port: await freePort() }, { domain: 'app.test', pathPrefix: null }, 2_000);
    expect(closed).toMatchObject({ state: 'failing', madeBy: 'none', status: null });
    expect(closed.error).toMatch(/ECONNREFUSED/);
    const silent = await probeRoute(target, { domain: 'silent.test', pathPrefix: null }, 300);
    expect(silent).toMatchObject({ state: 'failing', madeBy: 'none', status: null, error: 'no answer within 300 ms' });
    expect(silent.latencyMs).toBeGreaterThanOrEqual(295);
    expect(silent.latencyMs).toBeLessThan(800);
  });
});

describe('RouteProber', () => {
  it('probes new routes at once, each again one interval later, forgets removed ones; state changes are told', async () => {
    let changes = 0;
    const prober = new RouteProber({ intervalMs: 2_000, timeoutMs: 1_000, ratePerSecond: 50, target: async () => target, logger: silentLogger, onStateChange: () => (changes += 1) });
    const start = seen.length;
    prober.setRoutes([
      { domain: 'app.test', pathPrefix: null },
      { domain: 'unknown.test', pathPrefix: null },
    ]);
    const began = Date.now();
    prober.start();
    try {
      await until(() => prober.results().length === 2, 2_000);
      // Both within a few ticks of 20 ms (well before one interval), in map order.
      expect(Date.now() - began).toBeLessThan(1_000);
      expect(prober.results().map((r) => [r.domain, r.state])).toEqual([
        ['app.test', 'serving'],
        ['unknown.test', 'failing'],
      ]);
      expect(changes).toBe(2);
      const firstAt = seen.filter((s, i) => i >= start && s.host === 'app.test')[0]!.at;
      await until(() => seen.filter((s, i) => i >= start && s.host === 'app.test').length >= 2, 4_000);
      const secondAt = seen.filter((s, i) => i >= start && s.host === 'app.test')[1]!.at;
      expect(secondAt - firstAt).toBeGreaterThanOrEqual(1_990);
      expect(secondAt - firstAt).toBeLessThan(2_600);
      // Same state again: no change told.
      expect(changes).toBe(2);
      prober.setRoutes([{ domain: 'app.test', pathPrefix: null }]);
      expect(prober.results().map((r) => r.domain)).toEqual(['app.test']);
    } finally {
      await prober.stop();
    }
  });

  it('keeps to its rate: 10 routes at 20 a second take about half a second', async () => {
    const prober = new RouteProber({ intervalMs: 60_000, timeoutMs: 1_000, ratePerSecond: 20, target: async () => target, logger: silentLogger });
    prober.setRoutes(Array.from({ length: 10 }, (_, i) => ({ domain: 'app.test', pathPrefix: `/r${i}` })));
    const began = Date.now();
    prober.start();
    try {
      await until(() => prober.results().length === 10, 3_000);
      const took = Date.now() - began;
      expect(took).toBeGreaterThanOrEqual(9 * 50 - 10);
      expect(took).toBeLessThan(1_200);
    } finally {
      await prober.stop();
    }
  });
});

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
