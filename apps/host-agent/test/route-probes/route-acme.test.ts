import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureCaddy, ensureIptables, ensureKnot, ensurePebble, freePort, refuseAddress, startCaddy, startPebble, waitFor, type TestCaddy, type TestPebble } from '@tether/testkit';
import type { StaticRoutingController } from '../../src/proxy/index.js';
import { opensslView, tlsProber } from './helpers/tls-probe.js';
import { mapOf, removeTempDirs, route, startNamedServer, tempDir } from '../proxy/helpers/harness.js';
import { caddyLoadCount, staticController } from '../proxy/helpers/static-harness.js';

// The real ACME flow: Caddy's ACME issuer pointed at pebble (Let's Encrypt's
// test CA, its own root trusted through TETHER_PROXY_ACME_CA_ROOT), HTTP-01
// validated by pebble on Caddy's HTTP port, names resolved by the test's DNS
// server. A route's first TLS handshake (the route probe's) gets a certificate
// on demand; what the probe reports equals what openssl s_client sees; a name
// whose challenge resolves where no Caddy answers gets none (the handshake
// waits while Caddy retries; its ACME error is only in Caddy's log so far);
// none of it loads Caddy.

const ready = (await ensureCaddy()).available && (await ensureKnot()).available && (await ensurePebble()).available && (await ensureIptables()).available;


describe.skipIf(!ready)('route certificates from a real ACME CA (pebble, HTTP-01)', () => {
  let caddy: TestCaddy;
  let pebble: TestPebble;
  let controller: StaticRoutingController;
  let shop: Awaited<ReturnType<typeof startNamedServer>>;
  let httpsPort: number;
  const caddyLog: string[] = [];

  beforeAll(async () => {
    caddy = await startCaddy();
    caddy.process.stderr?.on('data', (c: Buffer) => caddyLog.push(...c.toString().split('\n')));
    pebble = await startPebble({ httpPort: caddy.httpPort });
    shop = await startNamedServer('shop');
    httpsPort = await freePort();
    controller = await staticController({
      adminUrl: caddy.adminUrl,
      adminListen: `127.0.0.1:${caddy.adminPort}`,
      stateDir: await tempDir(),
      httpPort: caddy.httpPort,
      serving: { tls: 'auto', httpPort: caddy.httpPort, httpsPort, acmeCa: pebble.directory, acmeCaRoot: pebble.caRoot },
      issuer: 'acme',
    });
    await controller.start();
  }, 60_000);

  afterAll(async () => {
    await controller?.stop();
    await controller?.knot.destroy();
    await shop?.close();
    await pebble?.stop();
    await caddy?.stop();
    await removeTempDirs();
  });

  it('a route gets its certificate from the CA on its first handshake; the probe reports what openssl sees; no load', async () => {
    const routed = route('shop.acme.test', `127.0.0.1:${shop.port}`);
    expect((await controller.apply(mapOf([routed]))).error).toBeNull();
    const loads = await caddyLoadCount(caddy.adminUrl);
    const prober = tlsProber(httpsPort, 30_000);
    prober.setRoutes([routed]);
    await prober.probeNext();
    const [probe] = prober.results();
    expect(probe, JSON.stringify(probe)).toMatchObject({ state: 'serving', status: 200, madeBy: 'app' });
    expect(probe!.certificate!.issuer).toMatch(/Pebble Intermediate CA/);
    expect(probe!.certificate).toEqual({ ...opensslView(httpsPort, 'shop.acme.test'), lastError: null });
    expect(await caddyLoadCount(caddy.adminUrl)).toBe(loads);
  }, 60_000);

  it('a name whose challenge resolves where no Caddy answers: the handshake waits on the failing issuance, no certificate', async () => {
    const stranded = route('stranded.acme.test', `127.0.0.1:${shop.port}`);
    const routed = route('shop.acme.test', `127.0.0.1:${shop.port}`);
    expect((await controller.apply(mapOf([routed, stranded]))).error).toBeNull();
    const loads = await caddyLoadCount(caddy.adminUrl);
    // An address where nothing answers (a local one whose connections are reset): pebble's HTTP-01 fails at once.
    const refused = refuseAddress('127.0.0.3');
    await pebble.setAddress('stranded.acme.test', '127.0.0.3');
    const prober = tlsProber(httpsPort, 3_000);
    prober.setRoutes([stranded]);
    try {
      await prober.probeNext();
      // Caddy saw the CA refuse the challenge (and retries with backoff while the handshake waits).
      await waitFor(() => caddyLog.some((l) => l.includes('stranded.acme.test') && l.includes('challenge failed') && l.includes('connection refused')), { timeoutMs: 10_000 });
    } finally {
      refused.release();
    }
    const [probe] = prober.results();
    expect(probe).toMatchObject({ state: 'failing', madeBy: 'none', status: null, error: 'no answer within 3000 ms' });
    expect(probe!.certificate).toEqual({ issuer: null, notBefore: null, notAfter: null, serial: null, lastError: 'no answer within 3000 ms' });
    expect(await caddyLoadCount(caddy.adminUrl)).toBe(loads);
  }, 60_000);
});
