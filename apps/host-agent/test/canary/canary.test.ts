import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureCaddy, ensureKnot, freePort, sleep, startCaddy, type TestCaddy } from '@tether/testkit';
import { CanaryMonitor, CanaryStateStore, startCanaryEndpoint, type CanaryEndpoint } from '../../src/canary/index.js';
import type { NewJournalEvent } from '../../src/proxy/event-journal.js';
import type { ReloadRecord, StaticRoutingController } from '../../src/proxy/index.js';
import { mapOf, removeTempDirs, route, silentLogger, startNamedServer, tempDir } from '../proxy/helpers/harness.js';
import { staticController } from '../proxy/helpers/static-harness.js';

// The canary against a real Caddy 2.6: the agent's endpoint, Caddy's own
// canary server in the config the controller renders, and the monitor's
// WebSocket and HTTP probes through it. Drops are made the real way: a load
// of new settings (Caddy closes every proxied WebSocket on a load) and a
// Caddy restart; a routing change makes none.

const caddyAvailable = (await ensureCaddy()).available && (await ensureKnot()).available;
const INTERVAL_MS = 200;

describe.skipIf(!caddyAvailable)('canary through a real Caddy', () => {
  let caddy: TestCaddy;
  let shop: Awaited<ReturnType<typeof startNamedServer>>;
  let endpoint: CanaryEndpoint;
  let canaryPort: number;
  let answererPort: number;
  let stateDir: string;
  let controller: StaticRoutingController;
  let monitor: CanaryMonitor;
  let drops: NewJournalEvent[];
  let reloads: ReloadRecord[];
  const secret = 'test-secret-0123456789';

  const makeMonitor = async () =>
    new CanaryMonitor({
      proxyUrl: `http://127.0.0.1:${canaryPort}`,
      secret,
      intervalMs: INTERVAL_MS,
      state: await CanaryStateStore.open(path.join(stateDir, 'canary-state.json'), { now: () => new Date(), logger: silentLogger }),
      onDrop: (e) => drops.push(e),
      logger: silentLogger,
      retryMs: 50,
      settleMs: 300,
    });

  const makeController = (more: { lookupRefreshMs?: number } = {}) =>
    staticController({
      adminUrl: caddy.adminUrl,
      adminListen: `127.0.0.1:${caddy.adminPort}`,
      stateDir,
      httpPort: caddy.httpPort,
      canary: { port: canaryPort, upstream: `127.0.0.1:${endpoint.port}` },
      answererListen: { host: '127.0.0.1', port: answererPort },
      checkIntervalMs: 100,
      lookupRefreshMs: 300,
      onReload: (r) => {
        reloads.push(r);
        monitor?.noteReload(r);
      },
      ...more,
    });

  beforeAll(async () => {
    caddy = await startCaddy();
    shop = await startNamedServer('shop');
    endpoint = await startCanaryEndpoint({ host: '127.0.0.1', port: 0, secret });
  });

  beforeEach(async () => {
    await caddy.restartEmpty();
    stateDir = await tempDir();
    canaryPort = await freePort();
    answererPort = await freePort();
    drops = [];
    reloads = [];
    controller = await makeController();
    monitor = await makeMonitor();
    await controller.start();
    await controller.apply(mapOf([route('shop.example.test', `127.0.0.1:${shop.port}`)]));
    monitor.start();
    await expect.poll(() => monitor.connected, { timeout: 5_000 }).toBe(true);
  });

  afterEach(async () => {
    await monitor?.stop();
    await controller?.stop();
    await controller?.knot.destroy();
  });

  afterAll(async () => {
    await endpoint?.close();
    await shop?.close();
    await caddy?.stop();
    await removeTempDirs();
  });

  it('288 identical pushes: zero drops, the canary WebSocket stays open and HTTP probes pass', async () => {
    for (let push = 1; push <= 288; push += 1) {
      const result = await controller.apply(mapOf([route('shop.example.test', `127.0.0.1:${shop.port}`)], push + 1));
      expect(result.reloaded).toBe(false);
    }
    // Several probe intervals with the echo and HTTP checks running.
    await sleep(5 * INTERVAL_MS);
    expect(monitor.connected).toBe(true);
    expect(monitor.drops).toBe(0);
    expect(drops).toEqual([]);
    expect(monitor.status()).toMatchObject({ connected: true, dropsTotal: 0, httpFailuresTotal: 0 });
  });

  it('a routing change: no load, no drop', async () => {
    const result = await controller.apply(mapOf([route('shop.example.test', `127.0.0.1:${shop.port}`), route('blog.example.test', `127.0.0.1:${shop.port}`)], 2));
    expect(result).toMatchObject({ changed: true, reloaded: false, error: null });
    await sleep(5 * INTERVAL_MS);
    expect(drops).toEqual([]);
    expect(reloads.map((r) => r.kind)).toEqual(['initial']);
  });

  it('new settings (an agent restarted with another lookup refresh): one load, one drop, closed with 1001, attributed to it, reconnected', async () => {
    await controller.stop();
    controller = await makeController({ lookupRefreshMs: 400 });
    await controller.start();
    await expect.poll(() => drops.length, { timeout: 5_000 }).toBe(1);
    const reason = 'proxy settings changed (agent configuration or version)';
    expect(reloads.map((r) => r.kind)).toEqual(['initial', 'change']);
    expect(drops[0]).toMatchObject({ event: 'canary.drop', cause: 'reload', reloadReason: reason, closeCode: 1001 });
    const reconnectMs = (drops[0] as { reconnectMs: number }).reconnectMs;
    expect(reconnectMs).toBeGreaterThanOrEqual(0);
    expect(reconnectMs).toBeLessThan(2_000);
    await sleep(4 * INTERVAL_MS);
    expect(drops).toHaveLength(1);
    expect(monitor.status()).toMatchObject({
      connected: true,
      dropsToday: 1,
      dropsTotal: 1,
      causesTotal: { reload: 1, proxyRestarted: 0, proxyUnreachable: 0, unexplained: 0 },
      lastDropCause: `reload: ${reason}`,
    });
  });

  it('Caddy restarted: the check repairs it (one repair-empty reload), one drop attributed to the restart; counters survive an agent restart', async () => {
    reloads.length = 0;
    await caddy.restartEmpty();
    await expect.poll(() => drops.length, { timeout: 10_000 }).toBe(1);
    // The drop is noted when the canary's WebSocket closes, the repair at the next check (100 ms): two events
    // with no order between them (seen: the drop first, the repair's record not yet in, under load).
    await expect.poll(() => reloads.map((r) => r.kind), { timeout: 5_000 }).toEqual(['repair-empty']);
    expect(drops[0]).toMatchObject({ cause: 'proxy-restarted', reloadReason: null });
    expect((drops[0] as { reconnectMs: number | null }).reconnectMs).not.toBeNull();
    await sleep(4 * INTERVAL_MS);
    expect(drops).toHaveLength(1);
    expect(reloads).toHaveLength(1);

    // The agent restarts: a new monitor on the same state file reports the same counters.
    const before = monitor.status();
    await monitor.stop();
    monitor = await makeMonitor();
    expect(monitor.status()).toEqual({ ...before, connected: false });
    monitor.start();
    await expect.poll(() => monitor.connected, { timeout: 5_000 }).toBe(true);
    // Its own stop and start were not drops.
    expect(monitor.status().dropsTotal).toBe(1);
  });

  it('Caddy frozen (SIGSTOP) then thawed: the echo goes missing, one drop attributed to an unreachable proxy', async () => {
    const pid = caddy.process.pid!;
    process.kill(pid, 'SIGSTOP');
    try {
      // Echo bound (the interval, 200 ms) plus a few reconnect attempts that time out.
      await sleep(8 * INTERVAL_MS);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await expect.poll(() => drops.length, { timeout: 10_000 }).toBe(1);
    expect(drops[0]).toMatchObject({ cause: 'proxy-unreachable', reloadReason: null });
    expect(reloads.map((r) => r.kind)).toEqual(['initial']);
    await expect.poll(() => monitor.connected, { timeout: 5_000 }).toBe(true);
  });

  it('the endpoint refuses a request without the secret, even through Caddy', async () => {
    const res = await fetch(`http://127.0.0.1:${canaryPort}/probe`, { headers: { host: 'canary.tether.internal' } }).catch(() => null);
    // fetch cannot set Host; the canary server then answers 404 for an unknown host, never the endpoint's 200.
    expect(res?.status === 200).toBe(false);
    const direct = await fetch(`http://127.0.0.1:${endpoint.port}/probe`);
    expect(direct.status).toBe(403);
    const withSecret = await fetch(`http://127.0.0.1:${endpoint.port}/probe`, { headers: { 'x-tether-canary-secret': secret } });
    expect(withSecret.status).toBe(200);
  });
});
