import { readFile, readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CaddyRoutingController } from '../../src/proxy/index.js';
import { mapOf, removeTempDirs, route, silentLogger, tempDir } from './helpers/harness.js';
import { memoryProxy } from './helpers/memory-proxy.js';

// Counter and state logic, with an in-memory proxy (the real-Caddy behaviour is in controller.test.ts).

async function setup(now: () => Date = () => new Date()) {
  const stateDir = await tempDir();
  const proxy = memoryProxy();
  const make = () =>
    new CaddyRoutingController({
      proxy,
      render: { admin: { listen: '127.0.0.1:2019' }, httpPort: 80, httpsPort: 443, tls: 'off' },
      configPath: path.join(stateDir, 'caddy.json'),
      statePath: path.join(stateDir, 'routing-state.json'),
      checkIntervalMs: 0,
      logger: silentLogger,
      now,
    });
  return { stateDir, proxy, make };
}

afterAll(removeTempDirs);

describe('reload counters and routing state', () => {
  it('counts reloads per UTC day: today resets at midnight, the total does not', async () => {
    let clock = new Date('2026-11-29T23:58:00.000Z');
    const { make } = await setup(() => clock);
    const controller = make();
    await controller.apply(mapOf([route('a.example.com', 'svc-a:80')]));
    await controller.apply(mapOf([route('b.example.com', 'svc-b:80')]));
    // The first load is 'initial': counted in the total, not in the disruptive reloads of the day.
    expect(controller.status()).toMatchObject({ reloadsTotal: 2, reloadsToday: 1, lastReloadAt: '2026-11-29T23:58:00.000Z' });

    clock = new Date('2026-11-30T00:00:01.000Z');
    expect(controller.status()).toMatchObject({ reloadsTotal: 2, reloadsToday: 0 });
    await controller.apply(mapOf([route('c.example.com', 'svc-c:80')]));
    expect(controller.status()).toMatchObject({ reloadsTotal: 3, reloadsToday: 1, lastReloadReason: 'added c.example.com; removed b.example.com' });
    // A restarted agent counts the same day the same way.
    const restarted = make();
    await restarted.start();
    expect(restarted.status()).toEqual(controller.status());
    await restarted.stop();
  });

  it('the same routes under new settings (the canary turned on): one reload of kind change, not drift', async () => {
    const { stateDir, proxy } = await setup();
    const reloads: string[] = [];
    const make = (canary: boolean) =>
      new CaddyRoutingController({
        proxy,
        render: { admin: { listen: '127.0.0.1:2019' }, httpPort: 80, httpsPort: 443, tls: 'off', canary: canary ? { listen: '127.0.0.1:9080', upstream: '127.0.0.1:9081' } : null },
        configPath: path.join(stateDir, 'caddy.json'),
        statePath: path.join(stateDir, 'routing-state.json'),
        checkIntervalMs: 0,
        logger: silentLogger,
        onReload: (r) => reloads.push(`${r.kind}: ${r.reason}`),
      });
    const map = mapOf([route('a.example.com', 'svc-a:80')]);
    await make(false).apply(map);
    const withCanary = make(true);
    expect(await withCanary.apply(map)).toMatchObject({ reloaded: true, error: null });
    expect(await withCanary.apply(map)).toMatchObject({ reloaded: false });
    expect(reloads).toEqual(['initial: added a.example.com', 'change: proxy settings changed (agent configuration or version)']);
  });

  it('writes neither the config nor the state file for an unchanged map (a redeploy: new version, same routes)', async () => {
    const { stateDir, proxy, make } = await setup();
    const controller = make();
    const routes = [route('a.example.com', 'svc-a:80')];
    await controller.apply(mapOf(routes, 1));
    const files = async () => Promise.all(['caddy.json', 'routing-state.json'].map(async (f) => (await stat(path.join(stateDir, f), { bigint: true })).mtimeNs));
    const before = await files();
    for (let i = 0; i < 20; i += 1) expect(await controller.apply(mapOf(routes.map((r) => ({ ...r })), i + 2))).toMatchObject({ changed: false, reloaded: false });
    expect(await files()).toEqual(before);
    expect(proxy.loads).toBe(1);
    // No temp files left behind either.
    expect((await readdir(stateDir)).sort()).toEqual(['caddy.json', 'routing-state.json']);
  });

  it('refuses a map whose hash is not the hash of its routes, and a route it cannot render, changing nothing', async () => {
    const { stateDir, proxy, make } = await setup();
    const controller = make();
    const map = mapOf([route('a.example.com', 'svc-a:80')]);
    const forged = await controller.apply({ ...map, hash: 'f'.repeat(64) });
    expect(forged).toMatchObject({ hash: 'f'.repeat(64), changed: false, reloaded: false });
    expect(forged.error).toMatch(/^PROXY_HASH_MISMATCH: /);
    const invalid = await controller.apply(mapOf([route('a.example.com', 'svc-a:80'), route('b.example.com', '{env.TOKEN}:80')]));
    expect(invalid.error).toMatch(/^PROXY_INVALID_ROUTE: upstream must be host:port/);
    expect(proxy.loads).toBe(0);
    expect(await readdir(stateDir)).toEqual([]);
    expect(controller.status()).toMatchObject({ appliedHash: null, reloadsTotal: 0 });
  });

  it('sets an unreadable state file aside and starts counting again instead of failing', async () => {
    const { stateDir, make } = await setup();
    await writeFile(path.join(stateDir, 'routing-state.json'), '{"version":1,"reloadsTotal":');
    const controller = make();
    await controller.start();
    expect(controller.status()).toMatchObject({ appliedHash: null, reloadsTotal: 0 });
    const files = await readdir(stateDir);
    expect(files.some((f) => f.startsWith('routing-state.json.unreadable-'))).toBe(true);
    await controller.apply(mapOf([route('a.example.com', 'svc-a:80')]));
    expect(JSON.parse(await readFile(path.join(stateDir, 'routing-state.json'), 'utf8'))).toMatchObject({ reloadsTotal: 1 });
    await controller.stop();
  });

  it('an unusable state folder turns into an error result, never a rejected apply', async () => {
    const dir = await tempDir();
    await writeFile(path.join(dir, 'not-a-folder'), '');
    const controller = new CaddyRoutingController({
      proxy: memoryProxy(),
      render: { admin: { listen: '127.0.0.1:2019' }, httpPort: 80, httpsPort: 443, tls: 'off' },
      configPath: path.join(dir, 'caddy.json'),
      statePath: path.join(dir, 'not-a-folder', 'routing-state.json'),
      checkIntervalMs: 0,
      logger: silentLogger,
    });
    const result = await controller.apply(mapOf([route('a.example.com', 'svc-a:80')]));
    expect(result).toMatchObject({ changed: false, reloaded: false, routing: { appliedHash: null, reloadsTotal: 0 } });
    expect(result.error).toMatch(/^PROXY_WRITE_FAILED: routing state .*not-a-folder.*ENOTDIR/);
  });

  it('after a restart repairs the proxy from the routes in place, before the panel pushes again', async () => {
    const { proxy, make } = await setup();
    const first = make();
    await first.apply(mapOf([route('a.example.com', 'svc-a:80')]));
    proxy.running = { admin: { listen: '127.0.0.1:2019' } };
    const second = make();
    await second.check();
    expect(proxy.loads).toBe(2);
    expect(second.status()).toMatchObject({ reloadsTotal: 2, lastReloadReason: 'repaired: proxy was running an empty config' });
  });
});

describe('reload reasons', () => {
  it('names added, removed and changed domains, at most ten of each, within the protocol limit', async () => {
    const { make } = await setup();
    const controller = make();
    const many = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => route(`${prefix}${String(i).padStart(2, '0')}.${Array(3).fill('x'.repeat(60)).join('.')}.example.com`, 'svc-a:80'));
    await controller.apply(mapOf([...many(15, 'gone'), route('same.example.com', 'svc-s:80'), route('moved.example.com', 'svc-m:80')]));
    const result = await controller.apply(mapOf([...many(15, 'new'), route('same.example.com', 'svc-s:80'), route('moved.example.com', 'svc-m:81')]));
    const reason = result.routing.lastReloadReason ?? '';
    expect(reason.length).toBe(4096);
    expect(result.error).toBeNull();
    expect(reason).toMatch(/^added new00\.[x.]+\.example\.com, .* and 5 more; removed gone00\./);
    expect(reason).not.toContain('same.example.com');
    // The changed domain comes after two long lists and is cut at the protocol limit here; short names keep it.
    const short = await controller.apply(mapOf([route('same.example.com', 'svc-s:80'), route('moved.example.com', 'svc-m:82')]));
    expect(short.routing.lastReloadReason).toMatch(/; changed moved\.example\.com$/);
  });
});
