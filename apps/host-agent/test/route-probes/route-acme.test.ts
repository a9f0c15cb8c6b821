import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { RouteProbe } from '@tether/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { caddyLoadCount, ensureCaddy, ensureIptables, ensureKnot, ensurePebble, freePort, opensslView, refuseAddress, startCaddy, startPebble, waitFor, type TestCaddy, type TestPebble } from '@tether/testkit';
import { loadConfig } from '../../src/config.js';
import type { RoutingController } from '../../src/controllers.js';
import type { StaticRoutingController } from '../../src/proxy/index.js';
import { probeTarget, withRouteProbes } from '../../src/route-probes/index.js';
import { mapOf, removeTempDirs, route, silentLogger, startNamedServer, tempDir } from '../proxy/helpers/harness.js';
import { staticController } from '../proxy/helpers/static-harness.js';

// The real ACME flow: Caddy's ACME issuer pointed at pebble (Let's Encrypt's
// test CA, its own root trusted through TETHER_PROXY_ACME_CA_ROOT), HTTP-01
// validated by pebble on Caddy's HTTP port, names resolved by
// pebble-challtestsrv, which the agent's DNS check asks too
// (TETHER_ROUTE_PROBE_DNS_SERVER). The route probes are wired from the agent's
// own config (loadConfig → withRouteProbes), as main.ts does:
// - a name whose DNS points here is probed and gets its certificate, equal to
//   what openssl s_client sees;
// - a name whose DNS points elsewhere is never handshaked: Caddy never hears
//   of it (no on-demand attempt, no order), the status says dns-elsewhere;
// - a name that points here but whose challenge the CA cannot reach shows
//   the CA's error (from Caddy's issuance log) in certificate.lastError;
// - none of it loads Caddy.

const ready = (await ensureCaddy()).available && (await ensureKnot()).available && (await ensurePebble()).available && (await ensureIptables()).available;

describe.skipIf(!ready)('route certificates from a real ACME CA (pebble, HTTP-01, DNS checked first)', () => {
  let caddy: TestCaddy;
  let pebble: TestPebble;
  let controller: StaticRoutingController;
  let probed: RoutingController;
  let shop: Awaited<ReturnType<typeof startNamedServer>>;
  let httpsPort: number;
  let issuanceLog: string;
  let loads: number;
  const caddyLog: string[] = [];
  const upstream = () => `127.0.0.1:${shop.port}`;
  const probeOf = (domain: string): RouteProbe | undefined => probed.status().probes?.find((p) => p.domain === domain);

  beforeAll(async () => {
    const stateDir = await tempDir();
    issuanceLog = path.join(stateDir, 'caddy-logs', 'issuance.log');
    caddy = await startCaddy();
    caddy.process.stderr?.on('data', (c: Buffer) => caddyLog.push(...c.toString().split('\n')));
    httpsPort = await freePort();
    // Both challenge types validate against this Caddy, as a public CA's would (Caddy picks one at random).
    pebble = await startPebble({ httpPort: caddy.httpPort, tlsPort: httpsPort });
    shop = await startNamedServer('shop');
    // What an operator sets (docs/operations.md); 127.0.0.3 is an address of this host that nothing serves (refused below).
    const config = loadConfig({
      TETHER_PANEL_URL: 'http://127.0.0.1:1',
      TETHER_NODE_TOKEN: 'test-token-0123456789',
      TETHER_STATE_DIR: stateDir,
      TETHER_PROXY: 'external',
      TETHER_CADDY_ADMIN_URL: caddy.adminUrl,
      TETHER_PROXY_TLS: 'auto',
      TETHER_PROXY_TLS_ISSUER: 'acme',
      TETHER_PROXY_HTTP_PORT: String(caddy.httpPort),
      TETHER_PROXY_HTTPS_PORT: String(httpsPort),
      TETHER_PROXY_ACME_CA: pebble.directory,
      TETHER_PROXY_ACME_CA_ROOT: pebble.caRoot,
      TETHER_PUBLIC_ADDRESSES: '127.0.0.1, 127.0.0.3',
      TETHER_ROUTE_PROBE_DNS_SERVER: pebble.dnsServer,
      TETHER_ROUTE_PROBE_INTERVAL_MS: '60000',
      TETHER_ROUTE_PROBE_TIMEOUT_MS: '3000',
      TETHER_ROUTE_PROBE_RATE: '20',
    });
    expect(config.proxy.issuanceLog).toBe(issuanceLog);
    controller = await staticController({
      adminUrl: caddy.adminUrl,
      adminListen: `127.0.0.1:${caddy.adminPort}`,
      stateDir,
      httpPort: caddy.httpPort,
      serving: { tls: 'auto', httpPort: caddy.httpPort, httpsPort, acmeCa: pebble.directory, acmeCaRoot: pebble.caRoot },
      issuer: 'acme',
      issuanceLog: config.proxy.issuanceLog,
    });
    probed = withRouteProbes(controller, config, { logger: silentLogger, target: probeTarget(config) });
    await probed.start();
    loads = await caddyLoadCount(caddy.adminUrl);
  }, 60_000);

  afterAll(async () => {
    await probed?.stop();
    await controller?.knot.destroy();
    await shop?.close();
    await pebble?.stop();
    await caddy?.stop();
    await removeTempDirs();
  });

  it('(a) a name whose DNS points here is probed and gets its certificate from the CA: what the probe reports equals openssl s_client', async () => {
    expect((await probed.apply(mapOf([route('shop.acme.test', upstream())]))).error).toBeNull();
    await waitFor(() => probeOf('shop.acme.test') !== undefined, { timeoutMs: 30_000 });
    const probe = probeOf('shop.acme.test')!;
    expect(probe, JSON.stringify(probe)).toMatchObject({ state: 'serving', status: 200, madeBy: 'app' });
    expect(probe.notProbed).toBeUndefined();
    expect(probe.certificate!.issuer).toMatch(/Pebble Intermediate CA/);
    expect(probe.certificate).toEqual({ ...opensslView(httpsPort, 'shop.acme.test'), lastError: null });
    // Caddy's issuance log has the certificate obtained: the loggers the static config names are the ones 2.6.2 uses.
    await waitFor(() => existsSync(issuanceLog) && readFileSync(issuanceLog, 'utf8').includes('"certificate obtained successfully","identifier":"shop.acme.test"'), { timeoutMs: 5_000 });
  }, 60_000);

  it('(b) a name whose DNS points elsewhere is never handshaked: Caddy never hears of it, no order; the status says dns-elsewhere', async () => {
    await pebble.setAddress('elsewhere.acme.test', '192.0.2.10');
    expect((await probed.apply(mapOf([route('shop.acme.test', upstream()), route('elsewhere.acme.test', upstream())]))).error).toBeNull();
    await waitFor(() => probeOf('elsewhere.acme.test') !== undefined, { timeoutMs: 10_000 });
    const probe = probeOf('elsewhere.acme.test')!;
    const text = 'not probed, no certificate requested: elsewhere.acme.test resolves to 192.0.2.10, not to this host (127.0.0.1, 127.0.0.3)';
    expect(probe).toMatchObject({ state: 'failing', madeBy: 'none', status: null, error: text, notProbed: { reason: 'dns-elsewhere', resolved: ['192.0.2.10'], hostAddresses: ['127.0.0.1', '127.0.0.3'] } });
    expect(probe.certificate).toEqual({ issuer: null, notBefore: null, notAfter: null, serial: null, lastError: text });
    // Give an on-demand attempt (had there been a handshake) time to show, then check both of Caddy's logs.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(caddyLog.filter((l) => l.includes('elsewhere.acme.test'))).toEqual([]);
    expect(readFileSync(issuanceLog, 'utf8')).not.toContain('elsewhere.acme.test');
  }, 60_000);

  it('(c) a name that points here but whose challenge the CA cannot reach: the CA\'s error is the certificate\'s lastError', async () => {
    // 127.0.0.3 is one of this host's addresses (so the name is probed) where every connection is reset: HTTP-01 fails.
    const refused = refuseAddress('127.0.0.3');
    try {
      await pebble.setAddress('stranded.acme.test', '127.0.0.3');
      expect((await probed.apply(mapOf([route('shop.acme.test', upstream()), route('elsewhere.acme.test', upstream()), route('stranded.acme.test', upstream())]))).error).toBeNull();
      await waitFor(() => probeOf('stranded.acme.test')?.certificate?.lastError?.startsWith('certificate issuance failed') === true, { timeoutMs: 20_000 });
    } finally {
      refused.release();
    }
    const probe = probeOf('stranded.acme.test')!;
    expect(probe).toMatchObject({ state: 'failing', madeBy: 'none', status: null, error: 'no answer within 3000 ms' });
    expect(probe.notProbed).toBeUndefined();
    const { lastError, ...fields } = probe.certificate!;
    expect(fields).toEqual({ issuer: null, notBefore: null, notAfter: null, serial: null });
    // The CA's own words: pebble's problem type and the refused connection of the challenge Caddy tried first.
    const httpChallenge = /challenge http-01 failed: HTTP 400 urn:ietf:params:acme:error:connection - .*127\.0\.0\.3:\d+: connect: connection refused/;
    const alpnChallenge = /challenge tls-alpn-01 failed: HTTP 403 urn:ietf:params:acme:error:unauthorized - Failed to connect to 127\.0\.0\.3:\d+ for the tls-alpn-01 challenge/;
    expect(lastError).toMatch(/^certificate issuance failed \(20\d\d-[^)]+\): /);
    expect([httpChallenge, alpnChallenge].some((r) => r.test(lastError!)), lastError!).toBe(true);
    // The shop route kept its certificate, without error.
    expect(probeOf('shop.acme.test')!.certificate!.lastError).toBeNull();
  }, 60_000);

  it('(d) none of it loaded Caddy, a full check of the config (with its issuance log) neither', async () => {
    await controller.check({ full: true });
    expect(await caddyLoadCount(caddy.adminUrl)).toBe(loads);
  });
});
