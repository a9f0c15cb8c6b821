import { readFile, readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { routingHash } from '@tether/protocol';
import { RoutingStateStore } from '../../src/proxy/routing-state.js';
import { removeTempDirs, route, silentLogger, tempDir } from './helpers/harness.js';

// The routing state across agent restarts: routes in place and reload
// counters (the static controller's use of it is in static-routing.test.ts).

afterAll(removeTempDirs);

const routes = [route('a.example.com', 'svc-a:80')];
const hash = routingHash(routes);

describe('reload counters and routing state', () => {
  it('counts reloads per UTC day: today resets at midnight, the total does not; a restarted agent reads the same', async () => {
    const file = path.join(await tempDir(), 'routing-state.json');
    let clock = new Date('2026-11-29T23:58:00.000Z');
    const open = () => RoutingStateStore.open(file, { now: () => clock, logger: silentLogger });
    const store = await open();
    await store.recordReload(hash, routes, 'static proxy config loaded (first configuration)', 'initial', 'static-a', clock);
    await store.recordReload(hash, routes, 'repaired', 'repair-drift', 'static-a', clock);
    await store.recordReload(hash, routes, 'settings', 'change', 'static-b', clock);
    // Today counts only the loads that cut connections for a reason of the agent's own (DISRUPTIVE_RELOAD_KINDS).
    expect(store.status()).toMatchObject({ reloadsTotal: 3, reloadsToday: 2, reloadKinds: { initial: 1, repairDrift: 1, change: 1 } });
    clock = new Date('2026-11-30T00:01:00.000Z');
    expect(store.status()).toMatchObject({ reloadsTotal: 3, reloadsToday: 0 });
    await store.recordReload(hash, routes, 'moved', 'static-move', 'static-a', clock);
    expect(store.status()).toMatchObject({ reloadsTotal: 4, reloadsToday: 1, lastReloadReason: 'moved', reloadKinds: { staticMove: 1 } });
    expect((await open()).status()).toEqual(store.status());
  });

  it('markApplied writes only when the hash or the settings digest changed', async () => {
    const file = path.join(await tempDir(), 'routing-state.json');
    const store = await RoutingStateStore.open(file, { now: () => new Date(), logger: silentLogger });
    await store.markApplied(hash, routes, 'static-a');
    const { mtimeMs } = await stat(file);
    await new Promise((r) => setTimeout(r, 20));
    await store.markApplied(hash, routes, 'static-a');
    expect((await stat(file)).mtimeMs).toBe(mtimeMs);
    await store.markApplied(hash, routes, 'static-b');
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ appliedHash: hash, renderDigest: 'static-b', reloadsTotal: 0 });
  });

  it('sets an unreadable state file aside and starts counting again instead of failing', async () => {
    const dir = await tempDir();
    const file = path.join(dir, 'routing-state.json');
    await writeFile(file, '{"version":1,"reloadsTotal":');
    const store = await RoutingStateStore.open(file, { now: () => new Date(), logger: silentLogger });
    expect(store.status()).toMatchObject({ appliedHash: null, reloadsTotal: 0 });
    expect((await readdir(dir)).some((f) => f.startsWith('routing-state.json.unreadable-'))).toBe(true);
    await store.recordReload(hash, routes, 'first', 'initial', 'static-a');
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ reloadsTotal: 1 });
  });
});
