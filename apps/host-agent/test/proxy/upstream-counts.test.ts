import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureCaddy, ensureKnot, startCaddy, waitFor, type TestCaddy } from '@tether/testkit';
import { createCaddyAdmin, type CaddyAdmin } from '../../src/proxy/index.js';
import { mapOf, removeTempDirs, tempDir } from './helpers/harness.js';
import { staticController } from './helpers/static-harness.js';
import { connectThroughProxy, startEchoServer, type EchoServer } from './helpers/ws-echo.js';

// What a drain's count rests on, checked on the real Caddy 2.6.2:
// GET /reverse_proxy/upstreams lists a dynamic upstream under the address it
// dialled (an `a` lookup: the container's own address; an SRV lookup: its
// target name) while a request to it is in flight; an open WebSocket counts 1
// for as long as it is open.

const ready = (await ensureCaddy()).available && (await ensureKnot()).available;

describe.skipIf(!ready)('Caddy counts open WebSockets per upstream', () => {
  let caddy: TestCaddy;
  let echo: EchoServer;
  let admin: CaddyAdmin;
  beforeAll(async () => {
    caddy = await startCaddy();
    echo = await startEchoServer();
    admin = createCaddyAdmin({ adminUrl: caddy.adminUrl, timeoutMs: 5_000 });
  });
  afterAll(async () => {
    await admin?.close();
    await echo?.close();
    await caddy?.stop();
    await removeTempDirs();
  });

  /** Opens two WebSockets through Caddy, closes them one by one: what `address` counts at each step. */
  async function countsOf(domain: string, address: string): Promise<number[]> {
    const count = async () => (await admin.upstreams()).filter((u) => u.address === address).reduce((n, u) => n + u.numRequests, 0);
    const seen = [await count()];
    const a = await connectThroughProxy(caddy.httpPort, domain);
    const b = await connectThroughProxy(caddy.httpPort, domain);
    await a.echo('x');
    await new Promise((r) => setTimeout(r, 1_500));
    seen.push(await count());
    a.close();
    await a.closed;
    await waitFor(async () => (await count()) === 1, { timeoutMs: 3_000, message: 'one left' });
    seen.push(await count());
    b.close();
    await b.closed;
    await waitFor(async () => (await count()) === 0, { timeoutMs: 3_000, message: 'none left' });
    seen.push(await count());
    return seen;
  }

  it('the container address (one port serves the route: looked up by address)', async () => {
    const routing = await staticController({
      adminUrl: caddy.adminUrl,
      adminListen: `127.0.0.1:${caddy.adminPort}`,
      stateDir: await tempDir(),
      httpPort: caddy.httpPort,
      endpoints: () => Promise.resolve(new Map([['svc_a', [{ id: 'abcdef0123456789', ip: '127.0.0.1' }]]])),
    });
    try {
      await routing.start();
      expect((await routing.apply(mapOf([{ domain: 'a.example.test', pathPrefix: null, serviceId: 'svc_a', upstream: `svc-a:${echo.port}` }]))).error).toBeNull();
      expect(await countsOf('a.example.test', `127.0.0.1:${echo.port}`)).toEqual([0, 2, 1, 0]);
      // What a drain asks: by container id.
      const held = await connectThroughProxy(caddy.httpPort, 'a.example.test');
      await held.echo('y');
      expect(await routing.traffic!.openConnections(['abcdef0123456789'])).toBe(1);
      expect(await routing.traffic!.openConnections(['fedcba9876543210'])).toBe(0);
      held.close();
      await held.closed;
    } finally {
      await routing.stop();
      await routing.knot.destroy();
    }
  });
});
