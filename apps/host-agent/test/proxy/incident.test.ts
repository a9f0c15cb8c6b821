import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureCaddy, startCaddy, type TestCaddy } from '@tether/testkit';
import type { CaddyRoutingController } from '../../src/proxy/index.js';
import { startAdminWitness, type AdminWitness } from './helpers/admin-witness.js';
import { externalController, fileIdentity, mapOf, removeTempDirs, route, startNamedServer, tempDir } from './helpers/harness.js';
import { connectThroughProxy, startEchoServer, type EchoClient, type EchoServer } from './helpers/ws-echo.js';

// Incident 2 replayed against a real Caddy 2.6: a day of 5-minute pushes of an
// unchanged map must leave a customer's WebSocket alone; one real change must
// not (Caddy 2.6 closes every proxied WebSocket with 1001 on any reload),
// which is what makes the first half able to fail.

const PUSHES_PER_DAY = (24 * 60) / 5;
const caddyAvailable = (await ensureCaddy()).available;

describe.skipIf(!caddyAvailable)('incident 2: 288 identical routing pushes', () => {
  let caddy: TestCaddy;
  let witness: AdminWitness;
  let echo: EchoServer;
  let shop: Awaited<ReturnType<typeof startNamedServer>>;
  let controller: CaddyRoutingController;
  let client: EchoClient;
  let configPath: string;

  beforeAll(async () => {
    caddy = await startCaddy();
    witness = await startAdminWitness({ port: caddy.adminPort });
    echo = await startEchoServer();
    shop = await startNamedServer('shop');
    const stateDir = await tempDir();
    configPath = path.join(stateDir, 'caddy.json');
    controller = externalController({ adminUrl: witness.url, adminListen: `127.0.0.1:${caddy.adminPort}`, stateDir, httpPort: caddy.httpPort });
    await controller.start();
  });

  afterAll(async () => {
    client?.close();
    await controller?.stop();
    await Promise.all([witness?.close(), echo?.close(), shop?.close()]);
    await caddy?.stop();
    await removeTempDirs();
  });

  const routes = () => [route('chat.example.test', `127.0.0.1:${echo.port}`), route('shop.example.test', `127.0.0.1:${shop.port}`), route('shop.example.test', `127.0.0.1:${echo.port}`, '/live')];

  it('a day of unchanged pushes: no file write, no load, and the WebSocket stays open and echoing', async () => {
    const first = await controller.apply(mapOf(routes()));
    expect(first).toMatchObject({ changed: true, reloaded: true, error: null });
    expect(witness.loads).toBe(1);

    client = await connectThroughProxy(caddy.httpPort, 'chat.example.test');
    expect(await client.echo('hello before the pushes')).toBe('hello before the pushes');
    const fileBefore = await fileIdentity(configPath);
    witness.reset();

    for (let push = 1; push <= PUSHES_PER_DAY; push += 1) {
      // What arrives over the wire is a freshly decoded object, in whatever order the panel built it.
      const wire = JSON.parse(JSON.stringify(mapOf(push % 2 ? routes() : routes().reverse(), push)));
      const result = await controller.apply(wire);
      expect(result, `push ${push}`).toMatchObject({ changed: false, reloaded: false, error: null, hash: first.hash });
    }

    // Every push really asked Caddy, with one small read each: the config's @id, never the whole config.
    expect(witness.idReads).toBe(PUSHES_PER_DAY);
    expect(witness.calls).toBe(PUSHES_PER_DAY);
    expect(witness.reads).toBe(0);
    expect(witness.loadAttempts).toBe(0);
    expect(await fileIdentity(configPath)).toBe(fileBefore);
    expect(controller.status()).toMatchObject({ appliedHash: first.hash, reloadsTotal: 1, reloadsToday: 0, reloadKinds: { initial: 1, repairEmpty: 0, change: 0, repairDrift: 0 } });
    expect(client.open).toBe(true);
    expect(await client.echo('still here after 288 pushes')).toBe('still here after 288 pushes');
  });

  it('one real change reloads once, and that reload closes the same WebSocket with 1001', async () => {
    witness.reset();
    const result = await controller.apply(mapOf([...routes(), route('new.example.test', `127.0.0.1:${shop.port}`)]));
    expect(result).toMatchObject({ changed: true, reloaded: true, error: null });
    expect(witness.loads).toBe(1);
    expect(controller.status()).toMatchObject({ reloadsTotal: 2, lastReloadReason: 'added new.example.test' });
    const code = await Promise.race([client.closed, new Promise((resolve) => setTimeout(() => resolve('still open'), 5_000))]);
    expect(code).toBe(1001);
  });
});
