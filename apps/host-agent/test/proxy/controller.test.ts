import { readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureCaddy, freePort, startCaddy, type TestCaddy } from '@tether/testkit';
import type { CaddyRoutingController } from '../../src/proxy/index.js';
import { startAdminWitness, type AdminWitness } from './helpers/admin-witness.js';
import { externalController, fileIdentity, httpGet, mapOf, removeTempDirs, route, startNamedServer, tempDir } from './helpers/harness.js';

// The controller against a real Caddy 2.6, with a witness counting every load
// on the admin API: the controller's own counters must agree with it.

const caddyAvailable = (await ensureCaddy()).available;

describe.skipIf(!caddyAvailable)('routing controller against a real Caddy', () => {
  let caddy: TestCaddy;
  let witness: AdminWitness;
  let services: Array<Awaited<ReturnType<typeof startNamedServer>>>;
  let shop: string;
  let blog: string;
  let stateDir: string;
  let controllers: CaddyRoutingController[];

  const make = (overrides: Parameters<typeof externalController>[0] extends infer T ? Partial<T> : never = {}) => {
    const c = externalController({ adminUrl: witness.url, adminListen: `127.0.0.1:${caddy.adminPort}`, stateDir, httpPort: caddy.httpPort, ...overrides });
    controllers.push(c);
    return c;
  };

  beforeAll(async () => {
    caddy = await startCaddy();
    witness = await startAdminWitness({ port: caddy.adminPort });
    services = await Promise.all(['shop', 'blog', 'api', 'api-v2'].map(startNamedServer));
    shop = `127.0.0.1:${services[0]?.port}`;
    blog = `127.0.0.1:${services[1]?.port}`;
  });

  beforeEach(async () => {
    await caddy.restartEmpty();
    witness.reset();
    stateDir = await tempDir();
    controllers = [];
  });

  afterEach(async () => {
    await Promise.all(controllers.map((c) => c.stop()));
  });

  afterAll(async () => {
    await witness?.close();
    await Promise.all((services ?? []).map((s) => s.close()));
    await caddy?.stop();
    await removeTempDirs();
  });

  it('attaching a domain: exactly one load, the domain answers through Caddy, counted with its reason', async () => {
    const controller = make();
    await controller.start();
    await controller.apply(mapOf([route('shop.example.test', shop)]));
    expect((await httpGet(caddy.httpPort, 'blog.example.test')).status).toBe(404);
    witness.reset();

    const result = await controller.apply(mapOf([route('shop.example.test', shop), route('blog.example.test', blog)], 2));
    expect(result).toMatchObject({ changed: true, reloaded: true, error: null });
    expect(witness.loads).toBe(1);
    expect(result.routing).toMatchObject({ reloadsTotal: 2, reloadsToday: 1, lastReloadReason: 'added blog.example.test' });
    expect(controller.status()).toEqual(result.routing);
    expect(await httpGet(caddy.httpPort, 'blog.example.test', '/post/1')).toEqual({ status: 200, body: 'blog /post/1' });
    expect(await httpGet(caddy.httpPort, 'shop.example.test')).toEqual({ status: 200, body: 'shop /' });
    expect(await httpGet(caddy.httpPort, 'unknown.example.test')).toMatchObject({ status: 404 });

    const removed = await controller.apply(mapOf([route('blog.example.test', shop)], 3));
    expect(removed.routing.lastReloadReason).toBe('removed shop.example.test; changed blog.example.test');
    expect(witness.loads).toBe(2);
  });

  it('routes the most specific path prefix first, the whole domain last', async () => {
    const [, , api, apiV2] = services.map((s) => `127.0.0.1:${s.port}`);
    const controller = make();
    await controller.apply(mapOf([route('app.example.test', shop), route('app.example.test', api as string, '/api'), route('app.example.test', apiV2 as string, '/api/v2')]));
    const body = async (p: string) => (await httpGet(caddy.httpPort, 'app.example.test', p)).body;
    expect(await body('/api/v2/users')).toBe('api-v2 /api/v2/users');
    expect(await body('/api/v2')).toBe('api-v2 /api/v2');
    expect(await body('/api/users')).toBe('api /api/users');
    expect(await body('/apiary')).toBe('shop /apiary');
    expect(await body('/')).toBe('shop /');
  });

  it('Caddy restarted with an empty config: the next identical push repairs it with one counted load', async () => {
    const controller = make();
    const map = mapOf([route('shop.example.test', shop)]);
    await controller.apply(map);
    const fileBefore = await fileIdentity(path.join(stateDir, 'caddy.json'));
    await caddy.restartEmpty();
    expect((await httpGet(caddy.httpPort, 'shop.example.test').catch(() => ({ status: 0 }))).status).toBe(0);
    witness.reset();

    const repaired = await controller.apply(map);
    expect(repaired).toMatchObject({ changed: true, reloaded: true, error: null });
    expect(repaired.routing).toMatchObject({ reloadsTotal: 2, lastReloadReason: 'repaired: proxy was running an empty config' });
    expect(witness.loads).toBe(1);
    // The file already held this config: only Caddy needed the load.
    expect(await fileIdentity(path.join(stateDir, 'caddy.json'))).toBe(fileBefore);
    expect((await httpGet(caddy.httpPort, 'shop.example.test')).body).toBe('shop /');
    expect(await controller.apply(map)).toMatchObject({ changed: false, reloaded: false });
    expect(witness.loads).toBe(1);
  });

  it('the periodic check repairs a restarted Caddy before the next push', async () => {
    const controller = make({ checkIntervalMs: 100 });
    await controller.start();
    await controller.apply(mapOf([route('shop.example.test', shop)]));
    // Counted from before the restart: the 100 ms check can repair Caddy while restartEmpty() still waits
    // to see its admin answer, and a reset after it would miss that load (a full run under load saw 0).
    witness.reset();
    await caddy.restartEmpty();
    await expect.poll(() => witness.loads, { timeout: 5_000 }).toBe(1);
    expect((await httpGet(caddy.httpPort, 'shop.example.test')).body).toBe('shop /');
    expect(controller.status().reloadsTotal).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(witness.loads).toBe(1);
  });

  it('agent restart: counters survive, and an identical map afterwards writes and loads nothing', async () => {
    const first = make();
    const map = mapOf([route('shop.example.test', shop), route('blog.example.test', blog)]);
    await first.apply(mapOf([route('shop.example.test', shop)]));
    await first.apply(map);
    const before = first.status();
    await first.stop();
    controllers = controllers.filter((c) => c !== first);
    const file = await fileIdentity(path.join(stateDir, 'caddy.json'));
    witness.reset();

    const second = make();
    await second.start();
    expect(second.status()).toEqual(before);
    expect(before).toMatchObject({ reloadsTotal: 2, lastReloadReason: 'added blog.example.test' });
    expect(await second.apply(map)).toMatchObject({ changed: false, reloaded: false, error: null });
    expect(witness.loadAttempts).toBe(0);
    expect(await fileIdentity(path.join(stateDir, 'caddy.json'))).toBe(file);
    expect(second.status()).toEqual(before);
  });

  it('a deleted config file is written again without touching Caddy', async () => {
    const controller = make();
    const map = mapOf([route('shop.example.test', shop)]);
    await controller.apply(map);
    await rm(path.join(stateDir, 'caddy.json'));
    witness.reset();
    expect(await controller.apply(map)).toMatchObject({ changed: true, reloaded: false, error: null });
    expect(witness.loadAttempts).toBe(0);
    expect(JSON.parse(await readFile(path.join(stateDir, 'caddy.json'), 'utf8')).apps.http.servers.tether.routes).toHaveLength(2);
    expect(controller.status().reloadsTotal).toBe(1);
  });

  it('a load Caddy refuses: a clear error, counters and state untouched, the next good apply loads once', async () => {
    const controller = make();
    await controller.apply(mapOf([route('shop.example.test', shop)]));
    const before = controller.status();
    const state = await readFile(path.join(stateDir, 'routing-state.json'), 'utf8');

    // A second controller on the same state whose HTTP port is taken: Caddy refuses that config.
    await controller.stop();
    controllers = [];
    const busy = net.createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const busyPort = (busy.address() as { port: number }).port;
    const blocked = make({ httpPort: busyPort, adminListen: `127.0.0.1:${caddy.adminPort}` });
    witness.reset();
    const failed = await blocked.apply(mapOf([route('shop.example.test', shop), route('blog.example.test', blog)]));
    expect(failed).toMatchObject({ changed: true, reloaded: false });
    expect(failed.error).toMatch(/^PROXY_REJECTED_CONFIG: load config: Caddy answered 400: .*address already in use/);
    expect(failed.routing).toEqual(before);
    expect(await readFile(path.join(stateDir, 'routing-state.json'), 'utf8')).toBe(state);
    expect(witness.loads).toBe(0);
    // Caddy kept serving the old config.
    expect((await httpGet(caddy.httpPort, 'shop.example.test')).body).toBe('shop /');

    await new Promise<void>((resolve) => busy.close(() => resolve()));
    const retried = await blocked.apply(mapOf([route('shop.example.test', shop), route('blog.example.test', blog)]));
    expect(retried).toMatchObject({ reloaded: true, error: null });
    expect(retried.routing.reloadsTotal).toBe(before.reloadsTotal + 1);
    expect(witness.loads).toBe(1);
  });

  it('an admin API that is gone or frozen gives a typed error quickly, never a hang', async () => {
    const gone = make({ adminUrl: 'http://127.0.0.1:1', adminTimeoutMs: 500 });
    const unreachable = await gone.apply(mapOf([route('shop.example.test', shop)]));
    expect(unreachable.error).toMatch(/^PROXY_UNREACHABLE: read config: Caddy admin at http:\/\/127\.0\.0\.1:1 unreachable \(ECONNREFUSED\)/);
    expect(unreachable.routing.reloadsTotal).toBe(0);

    const frozen = make({ adminTimeoutMs: 300 });
    witness.mode = 'hang';
    try {
      const started = Date.now();
      const result = await frozen.apply(mapOf([route('shop.example.test', shop)]));
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(result.error).toMatch(/^PROXY_TIMEOUT: read config: Caddy admin at .* did not answer within 300 ms/);
      expect(result).toMatchObject({ reloaded: false, routing: { reloadsTotal: 0, appliedHash: null } });
    } finally {
      witness.mode = 'pass';
    }
  });

  it('tls auto: Caddy takes the config and redirects plain HTTP to HTTPS for routed domains', async () => {
    const httpsPort = await freePort();
    const controller = make({ serving: { tls: 'auto', httpPort: caddy.httpPort, httpsPort, acmeEmail: 'ops@example.com' } });
    // Certificates cannot be issued offline; Caddy keeps trying in the background, the load itself succeeds.
    expect(await controller.apply(mapOf([route('shop.example.com', shop)]))).toMatchObject({ reloaded: true, error: null });
    const redirect = await new Promise<{ status: number; location: string | undefined }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: caddy.httpPort, path: '/cart', headers: { host: 'shop.example.com' } }, (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, location: res.headers.location });
      });
      req.on('error', reject);
      req.end();
    });
    // Caddy treats its own HTTPS port as the public one and leaves the port out of the redirect.
    expect(redirect).toEqual({ status: 308, location: 'https://shop.example.com/cart' });
  });

  it('an empty map loads a config that answers 404 to everything', async () => {
    const controller = make();
    await controller.apply(mapOf([route('shop.example.test', shop)]));
    const result = await controller.apply(mapOf([]));
    expect(result).toMatchObject({ reloaded: true, error: null, routing: { lastReloadReason: 'removed shop.example.test' } });
    expect((await httpGet(caddy.httpPort, 'shop.example.test')).status).toBe(404);
  });
});
