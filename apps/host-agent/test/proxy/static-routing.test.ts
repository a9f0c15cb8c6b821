import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { caddyLoadCount, ensureCaddy, ensureKnot, freePort, startCaddy, waitFor, type TestCaddy } from '@tether/testkit';
import type { StaticRoutingController } from '../../src/proxy/index.js';
import { startAdminWitness, type AdminWitness } from './helpers/admin-witness.js';
import { mapOf, removeTempDirs, route, startNamedServer, tempDir } from './helpers/harness.js';
import { installPerRouteState } from './helpers/per-route-fixture.js';
import { connectThroughProxy, startEchoServer } from './helpers/ws-echo.js';
import { getWithMarker, staticController } from './helpers/static-harness.js';

// The static proxy (the agent's only routing) with a real Caddy 2.6 and a
// real knotd: routes by host and by first path segment, Caddy's own answers
// marked, and not one load of Caddy after the first, whatever the maps do.

const ready = (await ensureCaddy()).available && (await ensureKnot()).available;

describe.skipIf(!ready)('static proxy: routing without config changes', () => {
  let caddy: TestCaddy;
  let witness: AdminWitness;
  let controller: StaticRoutingController;
  const servers: Array<Awaited<ReturnType<typeof startNamedServer>>> = [];
  let shop: (typeof servers)[number];
  let api: (typeof servers)[number];
  let blog: (typeof servers)[number];

  beforeAll(async () => {
    caddy = await startCaddy();
    witness = await startAdminWitness({ port: caddy.adminPort });
    for (const name of ['shop', 'api', 'blog']) servers.push(await startNamedServer(name));
    [shop, api, blog] = servers as [typeof shop, typeof api, typeof blog];
    controller = await staticController({ adminUrl: witness.url, adminListen: `127.0.0.1:${caddy.adminPort}`, stateDir: await tempDir(), httpPort: caddy.httpPort });
    await controller.start();
  });

  afterAll(async () => {
    await controller?.stop();
    await controller?.knot.destroy();
    await Promise.all(servers.map((s) => s.close()));
    await witness?.close();
    await caddy?.stop();
    await removeTempDirs();
  });

  it('routes by host and first segment, marks its own answers, and never loads Caddy after start', async () => {
    expect(witness.loads).toBe(1);
    const loadsAtStart = await caddyLoadCount(caddy.adminUrl);
    // Caddy's own counter saw the start's load (the assertion below can fail).
    expect(loadsAtStart).toBeGreaterThanOrEqual(1);
    const nothing = await getWithMarker(caddy.httpPort, 'shop.example.test');
    expect(nothing).toMatchObject({ status: 404, marker: 'no-route' });

    const result = await controller.apply(
      mapOf([
        route('shop.example.test', `127.0.0.1:${shop.port}`),
        route('shop.example.test', `127.0.0.1:${api.port}`, '/api'),
        route('gone.example.test', '127.0.0.1:1'),
        route('docs.example.test', `127.0.0.1:${api.port}`, '/api'),
      ]),
    );
    expect(result).toMatchObject({ changed: true, reloaded: false, error: null });
    expect((await getWithMarker(caddy.httpPort, 'shop.example.test', '/')).body).toBe('shop /');
    expect((await getWithMarker(caddy.httpPort, 'shop.example.test', '/api')).body).toBe('api /api');
    expect((await getWithMarker(caddy.httpPort, 'shop.example.test', '/api/users?x=1')).body).toBe('api /api/users?x=1');
    expect((await getWithMarker(caddy.httpPort, 'shop.example.test', '/apix')).body).toBe('shop /apix');
    expect((await getWithMarker(caddy.httpPort, 'shop.example.test', '/a.b/api')).body).toBe('shop /a.b/api');
    // A domain with prefix routes only: every other path is no route, as in the per-route config.
    expect((await getWithMarker(caddy.httpPort, 'docs.example.test', '/api/x')).body).toBe('api /api/x');
    for (const p of ['/', '/other', '/apix', '/a.b']) expect(await getWithMarker(caddy.httpPort, 'docs.example.test', p)).toMatchObject({ status: 404, marker: 'no-route' });
    // Names and the prefix's segment compare without case, as Caddy's host and path matchers do.
    expect((await getWithMarker(caddy.httpPort, 'Shop.Example.TEST', '/')).body).toBe('shop /');
    expect((await getWithMarker(caddy.httpPort, 'SHOP.example.test', '/api/v')).body).toBe('api /api/v');
    expect((await getWithMarker(caddy.httpPort, 'shop.example.test', '/API')).body).toBe('api /API');
    expect((await getWithMarker(caddy.httpPort, 'shop.example.test', '/Other')).body).toBe('shop /Other');
    expect((await getWithMarker(caddy.httpPort, 'DOCS.example.test', '/Api')).body).toBe('api /Api');
    // An upper-case name no route has: Caddy's own answer, marked (no-upstream: the lookup found nothing).
    const upperUnknown = await getWithMarker(caddy.httpPort, 'Other.example.test');
    expect(upperUnknown.marker).toBe('no-upstream');
    expect(upperUnknown.status).toBeGreaterThanOrEqual(500);
    const refused = await getWithMarker(caddy.httpPort, 'gone.example.test');
    expect(refused.marker).toBe('no-upstream');
    expect(refused.status).toBeGreaterThanOrEqual(500);
    const unknown = await getWithMarker(caddy.httpPort, 'other.example.test');
    expect(unknown).toMatchObject({ status: 404, marker: 'no-route' });
    // The app's own answers carry no marker.
    expect((await getWithMarker(caddy.httpPort, 'shop.example.test')).marker).toBeNull();

    // Move the whole domain to another service, drop the prefix: answers change, the config does not.
    await controller.apply(mapOf([route('shop.example.test', `127.0.0.1:${blog.port}`)]));
    await waitFor(async () => (await getWithMarker(caddy.httpPort, 'shop.example.test', '/api')).body === 'blog /api', { timeoutMs: 3_000, message: 'moved route' });

    // A no-op push writes nothing.
    const writes = controller.stats.answerWrites;
    const again = await controller.apply(mapOf([route('shop.example.test', `127.0.0.1:${blog.port}`)]));
    expect(again).toMatchObject({ changed: false, reloaded: false, error: null });
    expect(controller.stats.answerWrites).toBe(writes);

    expect(witness.loads).toBe(1);
    expect(await caddyLoadCount(caddy.adminUrl)).toBe(loadsAtStart);
    expect(controller.status()).toMatchObject({ reloadsTotal: 1, reloadsToday: 0 });
  });

  it('routes up to three segments, segment-wise and without case, the longest prefix winning, with no load', async () => {
    const loadsBefore = await caddyLoadCount(caddy.adminUrl);
    const [v1, deep, abc] = [await startNamedServer('v1'), await startNamedServer('deep'), await startNamedServer('abc')];
    servers.push(v1, deep, abc);
    const result = await controller.apply(
      mapOf([
        route('shop.example.test', `127.0.0.1:${shop.port}`),
        route('shop.example.test', `127.0.0.1:${api.port}`, '/api'),
        route('shop.example.test', `127.0.0.1:${v1.port}`, '/api/v1'),
        route('shop.example.test', `127.0.0.1:${deep.port}`, '/api/v1/x_y'),
        route('shop.example.test', `127.0.0.1:${abc.port}`, '/a_b-c'),
        route('docs.example.test', `127.0.0.1:${v1.port}`, '/api/v1'),
      ]),
    );
    expect(result).toMatchObject({ changed: true, reloaded: false, error: null });
    const body = async (host: string, p: string) => (await getWithMarker(caddy.httpPort, host, p)).body;
    // The test before left shop.example.test on blog: Caddy keeps that answer until it is older than `refresh`.
    await waitFor(async () => (await body('shop.example.test', '/')) === 'shop /', { timeoutMs: 3_000, message: 'whole domain back on shop' });
    const expected: Array<[string, string]> = [
      ['/api/v1', 'v1'],
      ['/api/v1/', 'v1'],
      ['/api/v1/users?x=1', 'v1'],
      ['/api/v1x', 'api'],
      ['/api/v2/users', 'api'],
      ['/api', 'api'],
      ['/apix', 'shop'],
      ['/apix/v1', 'shop'],
      ['/api/v1/x_y', 'deep'],
      ['/api/v1/x_y/z', 'deep'],
      ['/api/v1/x_y.js', 'v1'],
      ['/api/v1/x_yz', 'v1'],
      ['/a_b-c', 'abc'],
      ['/a_b-c/q', 'abc'],
      ['/a_b-', 'shop'],
      ['/', 'shop'],
      // Without case: upper-case paths and hosts take the case-blind lookups, deepest first.
      ['/API/V1/users', 'v1'],
      ['/Api/v1/X_Y/z', 'deep'],
      ['/api/V2', 'api'],
      ['/A_B-C', 'abc'],
      ['/APIX', 'shop'],
    ];
    for (const [p, who] of expected) expect(await body('shop.example.test', p), p).toBe(`${who} ${p}`);
    for (const [p, who] of expected) expect(await body('SHOP.Example.test', p), `upper host ${p}`).toBe(`${who} ${p}`);
    expect(await body('docs.example.test', '/api/v1/a')).toBe('v1 /api/v1/a');
    expect(await body('docs.example.test', '/API/v1/a')).toBe('v1 /API/v1/a');
    for (const p of ['/', '/api', '/api/v1x', '/api/v2/v1']) expect(await getWithMarker(caddy.httpPort, 'docs.example.test', p), p).toMatchObject({ status: 404, marker: 'no-route' });
    expect(await caddyLoadCount(caddy.adminUrl)).toBe(loadsBefore);
  });
});

describe.skipIf(!ready)('static proxy: the one-time move from the per-route config', () => {
  it('an agent upgraded to static routing loads once (kind static-move), keeps every route, and never loads again', async () => {
    const caddy = await startCaddy();
    const witness = await startAdminWitness({ port: caddy.adminPort });
    const echo = await startEchoServer();
    const shop = await startNamedServer('shop');
    const stateDir = await tempDir();
    const adminListen = `127.0.0.1:${caddy.adminPort}`;
    let controller: StaticRoutingController | undefined;
    try {
      const routes = [route('chat.example.test', `127.0.0.1:${echo.port}`), route('shop.example.test', `127.0.0.1:${shop.port}`)];
      // The previous release: the per-route config, one reload per change.
      await installPerRouteState({ stateDir, adminUrl: caddy.adminUrl, adminListen, httpPort: caddy.httpPort, routes });
      const client = await connectThroughProxy(caddy.httpPort, 'chat.example.test');
      witness.reset();

      controller = await staticController({ adminUrl: witness.url, adminListen, stateDir, httpPort: caddy.httpPort });
      await controller.start();
      // The move: exactly one load, recorded with its own kind; it is the last time a connection is cut by routing.
      expect(witness.loads).toBe(1);
      expect(controller.status()).toMatchObject({ reloadsTotal: 2, lastReloadReason: expect.stringContaining('moved to the static proxy config') });
      expect(controller.status().reloadKinds).toMatchObject({ initial: 1, staticMove: 1, change: 0 });
      expect(await Promise.race([client.closed, new Promise((r) => setTimeout(() => r('open'), 3_000))])).toBe(1001);
      expect((await getWithMarker(caddy.httpPort, 'shop.example.test')).body).toBe('shop /');

      const again = await connectThroughProxy(caddy.httpPort, 'chat.example.test');
      expect(await controller.apply(mapOf([...routes, route('new.example.test', `127.0.0.1:${shop.port}`)]))).toMatchObject({ changed: true, reloaded: false, error: null });
      expect((await getWithMarker(caddy.httpPort, 'new.example.test')).body).toBe('shop /');
      expect(await again.echo('after a change')).toBe('after a change');
      expect(witness.loads).toBe(1);
      again.close();
    } finally {
      await controller?.stop();
      await controller?.knot.destroy();
      await Promise.all([echo.close(), shop.close(), witness.close()]);
      await caddy.stop();
    }
  });
});

describe.skipIf(!ready)('static proxy: never loaded before its answers are published', () => {
  it('an agent moved to static routing whose answerer cannot start keeps the per-route config serving: no load, at start or at a check', async () => {
    const caddy = await startCaddy();
    const witness = await startAdminWitness({ port: caddy.adminPort });
    const shop = await startNamedServer('shop');
    const stateDir = await tempDir();
    const adminListen = `127.0.0.1:${caddy.adminPort}`;
    let controller: StaticRoutingController | undefined;
    try {
      await installPerRouteState({ stateDir, adminUrl: caddy.adminUrl, adminListen, httpPort: caddy.httpPort, routes: [route('shop.example.test', `127.0.0.1:${shop.port}`)] });
      witness.reset();
      // No knotd where the agent looks (an agent image without knot): nothing can answer the static config's lookups.
      controller = await staticController({ adminUrl: witness.url, adminListen, stateDir, httpPort: caddy.httpPort, knotd: path.join(stateDir, 'no-knotd') });
      await controller.start();
      const check = await controller.check({ full: true }).then(() => null, (e: unknown) => e as { code?: string });
      expect(check?.code).toBe('PROXY_ANSWERS_UNPUBLISHED');
      expect(witness.loads).toBe(0);
      expect((await getWithMarker(caddy.httpPort, 'shop.example.test')).body).toBe('shop /');
    } finally {
      await controller?.stop();
      await Promise.all([shop.close(), witness.close()]);
      await caddy.stop();
    }
  });
});

describe.skipIf(!ready)('static proxy: the canary goes through the answerer', () => {
  it('the canary server answers through an SRV lookup, and stops when the answerer is gone', async () => {
    const caddy = await startCaddy();
    const endpoint = await startNamedServer('canary-endpoint');
    const canaryPort = await freePort();
    const controller = await staticController({ adminUrl: caddy.adminUrl, adminListen: `127.0.0.1:${caddy.adminPort}`, stateDir: await tempDir(), httpPort: caddy.httpPort, canary: { port: canaryPort, upstream: `127.0.0.1:${endpoint.port}` }, lookupRefreshMs: 300 });
    try {
      await controller.start();
      expect(await controller.apply(mapOf([]))).toMatchObject({ error: null });
      expect(await getWithMarker(canaryPort, 'canary.tether.internal', '/probe')).toMatchObject({ status: 200, body: 'canary-endpoint /probe' });
      // A customer server never routes the canary's name.
      expect((await getWithMarker(caddy.httpPort, 'canary.tether.internal')).marker).toBe('no-route');
      await controller.stop();
      await controller.knot.destroy();
      await new Promise((r) => setTimeout(r, 400));
      const down = await getWithMarker(canaryPort, 'canary.tether.internal', '/probe');
      expect(down.status).toBeGreaterThanOrEqual(500);
    } finally {
      await controller.stop();
      await controller.knot.destroy();
      await endpoint.close();
      await caddy.stop();
    }
  });
});
