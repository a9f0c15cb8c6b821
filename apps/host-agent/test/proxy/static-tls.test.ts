import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { caddyLoadCount, ensureCaddy, ensureKnot, startCaddy, type TestCaddy } from '@tether/testkit';
import type { StaticRoutingController } from '../../src/proxy/index.js';
import { startAdminWitness, type AdminWitness } from './helpers/admin-witness.js';
import { WebSocket, type ClientOptions } from 'ws';
import { mapOf, removeTempDirs, route, startNamedServer } from './helpers/harness.js';
import { startEchoServer, type EchoServer } from './helpers/ws-echo.js';
import { getWithMarker, handshake, httpsGet, startStaticTlsController } from './helpers/static-harness.js';

// Certificates on demand with the static proxy (TETHER_PROXY_TLS=auto,
// TETHER_PROXY_TLS_ISSUER=internal): a name in the map gets a certificate on
// its first handshake, an unknown or removed name never does, plain HTTP is
// redirected, and none of it loads Caddy. Caddy asks its own loopback server,
// which answers from the domain files: the agent is not asked at all.

const ready = (await ensureCaddy()).available && (await ensureKnot()).available;

describe.skipIf(!ready)('static proxy: certificates on demand (internal issuer)', () => {
  let caddy: TestCaddy;
  let witness: AdminWitness;
  let controller: StaticRoutingController;
  let shop: Awaited<ReturnType<typeof startNamedServer>>;
  let httpsPort: number;
  let echo: EchoServer;

  beforeAll(async () => {
    caddy = await startCaddy();
    witness = await startAdminWitness({ port: caddy.adminPort });
    shop = await startNamedServer('shop');
    echo = await startEchoServer();
    ({ controller, httpsPort } = await startStaticTlsController(caddy, witness.url));
  });

  afterAll(async () => {
    await controller?.stop();
    await controller?.knot.destroy();
    await shop?.close();
    await echo?.close();
    await witness?.close();
    await caddy?.stop();
    await removeTempDirs();
  });

  it('issues only for names in the map, redirects HTTP, and never loads Caddy', async () => {
    const loads = await caddyLoadCount(caddy.adminUrl);
    expect(witness.loads).toBe(1);
    expect(await controller.apply(mapOf([route('shop.example.test', `127.0.0.1:${shop.port}`), route('blog.example.test', `127.0.0.1:${shop.port}`)]))).toMatchObject({ reloaded: false, error: null });

    const started = performance.now();
    const issued = await handshake(httpsPort, 'shop.example.test');
    console.log(`on-demand certificate (internal issuer): first handshake ${(performance.now() - started).toFixed(0)} ms`);
    expect(issued).toEqual({ ok: true, names: 'DNS:shop.example.test' });
    expect(await httpsGet(httpsPort, 'shop.example.test')).toEqual({ status: 200, body: 'shop /' });

    const unknown = await handshake(httpsPort, 'unknown.example.test');
    expect(unknown.ok).toBe(false);

    // Removed from the map: a name that never had a certificate gets none.
    await controller.apply(mapOf([route('shop.example.test', `127.0.0.1:${shop.port}`)]));
    expect((await handshake(httpsPort, 'blog.example.test')).ok).toBe(false);

    const redirect = await getWithMarker(caddy.httpPort, 'shop.example.test', '/a?b=1');
    expect(redirect.status).toBe(308);

    expect(witness.loads).toBe(1);
    expect(await caddyLoadCount(caddy.adminUrl)).toBe(loads);
  });

  it('a WebSocket held over TLS stays open and echoes in order while new names are attached and get certificates', async () => {
    const loads = await caddyLoadCount(caddy.adminUrl);
    let routes = [route('shop.example.test', `127.0.0.1:${shop.port}`), route('chat.example.test', `127.0.0.1:${echo.port}`)];
    await controller.apply(mapOf(routes));
    // ws hands its options to tls.connect; `servername` (SNI) is one its types do not list.
    const tlsOptions = { headers: { host: 'chat.example.test' }, servername: 'chat.example.test', rejectUnauthorized: false };
    const socket = new WebSocket(`wss://127.0.0.1:${httpsPort}/`, tlsOptions as ClientOptions);
    await new Promise<void>((resolve, reject) => (socket.once('open', resolve), socket.once('error', reject)));
    let closedWith: number | null = null;
    socket.on('close', (code) => (closedWith = code));
    const echoes: number[] = [];
    socket.on('message', (d: Buffer) => echoes.push(Number(d.toString('utf8'))));
    let sent = 0;
    const ticker = setInterval(() => socket.send(String(sent++)), 100);
    try {
      for (let i = 0; i < 5; i += 1) {
        routes = [...routes, route(`new${i}.example.test`, `127.0.0.1:${shop.port}`)];
        expect(await controller.apply(mapOf(routes))).toMatchObject({ reloaded: false, error: null });
        expect(await handshake(httpsPort, `new${i}.example.test`)).toEqual({ ok: true, names: `DNS:new${i}.example.test` });
      }
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      clearInterval(ticker);
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(closedWith).toBeNull();
    expect(sent).toBeGreaterThan(5);
    expect(echoes).toEqual([...Array(sent).keys()]);
    socket.close();
    expect(await caddyLoadCount(caddy.adminUrl)).toBe(loads);
  });
});
