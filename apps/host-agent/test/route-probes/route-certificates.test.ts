import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureCaddy, ensureKnot, opensslView, startCaddy, type TestCaddy } from '@tether/testkit';
import type { StaticRoutingController } from '../../src/proxy/index.js';
import { tlsProber } from './helpers/tls-probe.js';
import { rfc4514 } from '../../src/route-probes/certificate.js';
import { mapOf, removeTempDirs, route, startNamedServer } from '../proxy/helpers/harness.js';
import { startStaticTlsController } from '../proxy/helpers/static-harness.js';

// The certificate of a route's domain as a TLS client sees it, read by the
// route probe through a real Caddy (static config, on-demand certificates from
// Caddy's internal CA): equal to what `openssl s_client` sees, and a name
// Caddy will not certify shows its handshake error.

const ready = (await ensureCaddy()).available && (await ensureKnot()).available;


describe('rfc4514', () => {
  it('most specific first, special characters escaped', () => {
    expect(rfc4514('C=US\nO=Example, Inc.\nCN=Example CA')).toBe('CN=Example CA,O=Example\\, Inc.,C=US');
    expect(rfc4514('CN= lead+trail ')).toBe('CN=\\ lead\\+trail\\ ');
  });
});

describe.skipIf(!ready)('route probes over TLS: the certificate as seen', () => {
  let caddy: TestCaddy;
  let controller: StaticRoutingController;
  let shop: Awaited<ReturnType<typeof startNamedServer>>;
  let httpsPort: number;

  beforeAll(async () => {
    caddy = await startCaddy();
    shop = await startNamedServer('shop');
    ({ controller, httpsPort } = await startStaticTlsController(caddy, caddy.adminUrl));
  });

  afterAll(async () => {
    await controller?.stop();
    await controller?.knot.destroy();
    await shop?.close();
    await caddy?.stop();
    await removeTempDirs();
  });

  it('a routed name: serving, with issuer, validity and serial equal to openssl s_client; a name Caddy refuses: its handshake error', async () => {
    const routed = route('shop.certs.test', `127.0.0.1:${shop.port}`);
    const result = await controller.apply(mapOf([routed]));
    expect(result.error).toBeNull();
    const prober = tlsProber(httpsPort, 10_000);
    // The second name is probed but not in the map Caddy serves: its ask is refused, so nothing is issued.
    prober.setRoutes([routed, { domain: 'stranger.certs.test', pathPrefix: null }]);
    await prober.probeNext();
    await prober.probeNext();
    const [shopProbe, strangerProbe] = prober.results();
    expect(shopProbe).toMatchObject({ domain: 'shop.certs.test', state: 'serving', status: 200, madeBy: 'app' });
    const seen = opensslView(httpsPort, 'shop.certs.test');
    expect(shopProbe!.certificate).toEqual({ ...seen, lastError: null });
    expect(seen.issuer).toMatch(/^CN=Caddy Local Authority/);
    expect(strangerProbe).toMatchObject({ domain: 'stranger.certs.test', state: 'failing', madeBy: 'none', status: null });
    expect(strangerProbe!.certificate).toMatchObject({ issuer: null, serial: null, notAfter: null });
    expect(strangerProbe!.certificate!.lastError).toMatch(/alert|handshake|socket|ECONNRESET/i);
    expect(strangerProbe!.certificate!.lastError).toBe(strangerProbe!.error);
  }, 60_000);
});
