import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureCaddy, startCaddy, type TestCaddy } from '@tether/testkit';
import type { CaddyRoutingController, ReloadRecord } from '../../src/proxy/index.js';
import { startAdminWitness, type AdminWitness } from './helpers/admin-witness.js';
import { externalController, httpGet, mapOf, removeTempDirs, route, startNamedServer, tempDir } from './helpers/harness.js';

// The constant-time no-op decision against a real Caddy 2.6: an unchanged push
// asks Caddy one small question (GET /id/<config id>), whatever the map's size;
// what that question cannot see (a hand edit that kept the id) is found by the
// slower periodic full compare. The witness counts every admin call.

const caddyAvailable = (await ensureCaddy()).available;

describe.skipIf(!caddyAvailable)('no-op decision by the config id', () => {
  let caddy: TestCaddy;
  let witness: AdminWitness;
  let shop: Awaited<ReturnType<typeof startNamedServer>>;
  let blog: Awaited<ReturnType<typeof startNamedServer>>;
  let controllers: CaddyRoutingController[];
  let reloads: ReloadRecord[];

  const make = async (overrides: Parameters<typeof externalController>[0] extends infer T ? Partial<T> : never = {}) => {
    const c = externalController({
      adminUrl: witness.url,
      adminListen: `127.0.0.1:${caddy.adminPort}`,
      stateDir: await tempDir(),
      httpPort: caddy.httpPort,
      onReload: (r) => reloads.push(r),
      ...overrides,
    });
    controllers.push(c);
    return c;
  };
  const routes = () => [route('shop.example.test', `127.0.0.1:${shop.port}`), route('blog.example.test', `127.0.0.1:${blog.port}`)];

  /** Changes the upstream of the first route behind the agent's back, as an operator with curl would. */
  const handEdit = async (dial: string) => {
    const res = await fetch(`${caddy.adminUrl}/config/apps/http/servers/tether/routes/0/handle/0/upstreams/0/dial`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(dial),
    });
    expect(res.status).toBe(200);
  };

  beforeAll(async () => {
    caddy = await startCaddy();
    witness = await startAdminWitness({ port: caddy.adminPort });
    [shop, blog] = await Promise.all([startNamedServer('shop'), startNamedServer('blog')]);
  });

  beforeEach(async () => {
    await caddy.restartEmpty();
    witness.reset();
    controllers = [];
    reloads = [];
  });

  afterEach(async () => {
    await Promise.all(controllers.map((c) => c.stop()));
  });

  afterAll(async () => {
    await witness?.close();
    await Promise.all([shop?.close(), blog?.close()]);
    await caddy?.stop();
    await removeTempDirs();
  });

  it('an unchanged push makes exactly one admin call, a GET /id/ of a few hundred bytes', async () => {
    const controller = await make();
    await controller.apply(mapOf(routes()));
    witness.reset();
    for (let i = 0; i < 20; i += 1) {
      expect(await controller.apply(JSON.parse(JSON.stringify(mapOf(i % 2 ? routes() : routes().reverse(), i + 2))))).toMatchObject({ changed: false, reloaded: false, error: null });
    }
    expect({ calls: witness.calls, idReads: witness.idReads, reads: witness.reads, loads: witness.loadAttempts }).toEqual({ calls: 20, idReads: 20, reads: 0, loads: 0 });
    expect(reloads.map((r) => r.kind)).toEqual(['initial']);
  });

  it('a hand edit that keeps the id is not seen by a push, and is repaired by the periodic full compare as repair-drift', async () => {
    const controller = await make();
    await controller.apply(mapOf(routes()));
    await handEdit(`127.0.0.1:${blog.port}`);
    expect((await httpGet(caddy.httpPort, 'blog.example.test')).body).toBe('blog /');
    // Sorted by domain, route 0 is blog's: point it at shop instead.
    await handEdit(`127.0.0.1:${shop.port}`);
    expect((await httpGet(caddy.httpPort, 'blog.example.test')).body).toBe('shop /');
    witness.reset();

    // The push decides by the id alone: it does not see the edit (the price of a constant-time decision).
    expect(await controller.apply(mapOf(routes(), 9))).toMatchObject({ reloaded: false });
    expect(witness.loadAttempts).toBe(0);

    // The slow check compares everything and puts the routes back.
    await controller.check({ full: true });
    expect(witness.loads).toBe(1);
    expect((await httpGet(caddy.httpPort, 'blog.example.test')).body).toBe('blog /');
    expect(reloads.map((r) => [r.kind, r.reason])).toEqual([
      ['initial', 'added blog.example.test, shop.example.test'],
      ['repair-drift', 'repaired: proxy config differed from the routes in place'],
    ]);
    expect(controller.status()).toMatchObject({ reloadsTotal: 2, reloadsToday: 1, reloadKinds: { initial: 1, repairEmpty: 0, change: 0, repairDrift: 1 } });
  });

  it('the periodic check does the full compare every fullCheckIntervalMs, and only an id read in between', async () => {
    const controller = await make({ checkIntervalMs: 50, fullCheckIntervalMs: 600 });
    await controller.apply(mapOf(routes()));
    await controller.start();
    await handEdit(`127.0.0.1:${shop.port}`);
    witness.reset();
    const started = Date.now();
    await expect.poll(() => reloads.length, { timeout: 5_000, interval: 20 }).toBe(2);
    const tookMs = Date.now() - started;
    expect(witness.loads).toBe(1);
    // Not before the full-check interval since the last full compare (the apply above), not much after it.
    expect(tookMs).toBeGreaterThan(300);
    expect(tookMs).toBeLessThan(2_500);
    expect(witness.idReads).toBeGreaterThan(2);
    expect(reloads.at(-1)?.kind).toBe('repair-drift');
  });

  it('a config without the id (another config, an empty Caddy) falls back to the full compare', async () => {
    const controller = await make();
    await controller.apply(mapOf(routes()));
    await caddy.restartEmpty();
    witness.reset();
    expect(await controller.apply(mapOf(routes(), 2))).toMatchObject({ reloaded: true, error: null });
    expect({ idReads: witness.idReads, reads: witness.reads, loads: witness.loads }).toEqual({ idReads: 1, reads: 1, loads: 1 });
    expect(reloads.map((r) => r.kind)).toEqual(['initial', 'repair-empty']);
    expect(reloads[1]).toMatchObject({ reason: 'repaired: proxy was running an empty config', hashBefore: reloads[1]?.hashAfter });
    // A real change after it is a change, and counts as disruptive.
    await controller.apply(mapOf([routes()[0]!], 3));
    expect(reloads.at(-1)).toMatchObject({ kind: 'change', reason: 'removed blog.example.test' });
    expect(controller.status()).toMatchObject({ reloadsTotal: 3, reloadsToday: 1, reloadKinds: { initial: 1, repairEmpty: 1, change: 1, repairDrift: 0 } });
  });
});
