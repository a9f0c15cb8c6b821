import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  caddyLoadCount, ensureCaddy, ensureDocker, ensureIptables, ensureKnot, ensurePebble, freePort, opensslView, refuseAddress,
  startCaddy, startPebble, startTestPostgres, waitFor, type TestCaddy, type TestPebble, type TestPostgres,
} from '@tether/testkit';
import { externalStaticProxyEnv, startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { ensureEchoImage } from './helpers/echo-image.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { attachRoute, createTeam, deployEchoService, routingSettled, sessionRow, type RoutedHost } from './helpers/routed-host.js';

// Route certificates from a real ACME CA, read the way a customer reads them:
// a real panel, a real agent process in external static mode (TETHER_PROXY_TLS
// =auto, TETHER_PROXY_TLS_ISSUER=acme) against a real Caddy, pebble as the CA
// (HTTP-01 on Caddy's HTTP port, TLS-ALPN-01 on its HTTPS port: Caddy picks
// one at random), names resolved by pebble-challtestsrv, which the agent's DNS
// check asks too. Through GET /v1/routes/:id:
// - a name pointing here gets its certificate, equal to what openssl s_client sees;
// - a name pointing here whose challenge the CA cannot reach shows the CA's error;
// - a name pointing elsewhere reads unknown, dns-elsewhere, no certificate asked for;
// - none of it loads Caddy.

const ready =
  (await ensureDocker()).available && (await ensureCaddy()).available && (await ensureKnot()).available && (await ensurePebble()).available && (await ensureIptables()).available;
const tag = process.pid.toString(36);
const PROBE_INTERVAL_MS = 1_000;
const PROBE_TIMEOUT_MS = 3_000;
const HEARTBEAT_MS = 200;
/** A change shows through the API within one probe interval + one heartbeat + 1 s (a probe that times out: + its time-out). */
const BOUND_MS = PROBE_INTERVAL_MS + HEARTBEAT_MS + 1_000;

interface Certificate {
  issuer: string | null;
  notBefore: string | null;
  notAfter: string | null;
  serial: string | null;
  lastError: string | null;
}
interface RouteView {
  id: string;
  domain: string;
  createdAt: string;
  health: { state: string; reason: string; evidence: { at: string; madeBy: string; status: number | null; notProbed?: unknown } | null };
  certificate: Certificate | null;
}

let pg: TestPostgres;
let panel: Panel;
let caddy: TestCaddy;
let pebble: TestPebble;
let agent: AgentProcess;
let httpsPort: number;
let serviceId: string;
let loads: number;

beforeAll(async () => {
  if (!ready) return;
  pg = await startTestPostgres();
  const image = await ensureEchoImage();
  panel = await startPanel({ pg, env: { TETHER_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_MS), TETHER_ROUTING_DEBOUNCE_MS: '100' } });
  caddy = await startCaddy();
  httpsPort = await freePort();
  pebble = await startPebble({ httpPort: caddy.httpPort, tlsPort: httpsPort });
  const node = await panel.createNode(`acme-${tag}`);
  agent = await startAgentProcess({
    panelUrl: panel.url,
    token: node.token,
    nodeName: node.name,
    runtime: 'docker',
    env: await externalStaticProxyEnv(caddy, {
      TETHER_PROXY_HTTPS_PORT: String(httpsPort),
      TETHER_PROXY_TLS: 'auto',
      TETHER_PROXY_TLS_ISSUER: 'acme',
      TETHER_PROXY_ACME_CA: pebble.directory,
      TETHER_PROXY_ACME_CA_ROOT: pebble.caRoot,
      // 127.0.0.3 is an address of this host where nothing answers (refused below): a name pointing there is probed.
      TETHER_PUBLIC_ADDRESSES: '127.0.0.1, 127.0.0.3',
      TETHER_ROUTE_PROBE_DNS_SERVER: pebble.dnsServer,
      TETHER_ROUTE_PROBE_INTERVAL_MS: String(PROBE_INTERVAL_MS),
      TETHER_ROUTE_PROBE_TIMEOUT_MS: String(PROBE_TIMEOUT_MS),
      TETHER_ROUTE_PROBE_RATE: '20',
    }),
  });
  const host: RoutedHost = { nodeId: node.id, nodeName: node.name, token: node.token, agent, httpPort: caddy.httpPort };
  await waitFor(async () => routingSettled(await sessionRow(panel, node.id)), { timeoutMs: 60_000, message: `session open and first map applied\n${agent.process.output().slice(-3000)}` });
  // Counted after the first apply: from here on, nothing may load Caddy.
  loads = await caddyLoadCount(caddy.adminUrl);
  ({ serviceId } = await deployEchoService(panel, host, await createTeam(panel), image, 'shop'));
}, 180_000);

afterAll(async () => {
  await agent?.destroy();
  await pebble?.stop();
  await caddy?.stop();
  await panel?.close();
  await pg?.stop();
});

describe.skipIf(!ready)('route certificates from a real ACME CA (pebble) through the REST API', () => {
  const shop = `shop.${tag}.acme-api.test`;
  const stranded = `stranded.${tag}.acme-api.test`;
  const elsewhere = `elsewhere.${tag}.acme-api.test`;

  const routeOf = async (domain: string): Promise<RouteView> => {
    const list = await panel.api('GET', `/v1/routes?serviceId=${serviceId}`);
    const id = (list.body as RouteView[]).find((r) => r.domain === domain)!.id;
    const res = await panel.api('GET', `/v1/routes/${id}`);
    if (res.status !== 200) throw new Error(`route ${domain}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as RouteView;
  };
  const until = async (domain: string, test: (r: RouteView) => boolean, timeoutMs: number, what: string) => {
    const began = Date.now();
    const seen = await waitFor(async () => {
      const r = await routeOf(domain);
      return test(r) ? r : null;
    }, { timeoutMs, intervalMs: 50, message: `${domain}: ${what}\n${agent.process.output().slice(-2000)}` });
    return { route: seen, took: Date.now() - began };
  };

  it('attaching a route gets a certificate from the CA: issuer, dates and serial in the API equal what openssl s_client sees', async () => {
    await attachRoute(panel, serviceId, shop);
    // Issuance happens during the first probe's handshake (on demand): allow it a probe time-out on top of the bound.
    const { route, took } = await until(shop, (r) => r.certificate !== null && r.certificate.lastError === null, BOUND_MS + PROBE_TIMEOUT_MS + 5_000, 'a certificate');
    console.log(`certificate in the API ${took} ms after the route was attached; health ${route.health.state}: ${route.health.reason}`);
    const seen = opensslView(httpsPort, shop);
    expect(route.certificate).toEqual({ ...seen, lastError: null });
    expect(route.certificate!.issuer).toMatch(/Pebble Intermediate CA/);
    expect(route.certificate!.serial).toMatch(/^[0-9a-f]+$/);
    // Valid now, both ways; the probe it was read from was made after the route existed and before this read.
    const now = Date.now();
    expect(Date.parse(route.certificate!.notBefore!)).toBeLessThanOrEqual(now);
    expect(Date.parse(route.certificate!.notAfter!)).toBeGreaterThan(now);
    const probedAt = Date.parse(route.health.evidence!.at);
    expect(probedAt).toBeGreaterThanOrEqual(Date.parse(route.createdAt));
    expect(probedAt).toBeLessThanOrEqual(now);
    // The service's container answers through Caddy over TLS: the probe the certificate came from saw the app.
    expect(route.health).toMatchObject({ state: 'serving', evidence: { madeBy: 'app', status: 200 } });
    expect(route.health.evidence!.notProbed).toBeUndefined();
  });

  it('a name whose challenge resolves to an address no Caddy serves shows the CA\'s error in its certificate.lastError', async () => {
    const refused = refuseAddress('127.0.0.3');
    let route: RouteView;
    try {
      await pebble.setAddress(stranded, '127.0.0.3');
      await attachRoute(panel, serviceId, stranded);
      ({ route } = await until(stranded, (r) => r.certificate?.lastError?.startsWith('certificate issuance failed') === true, 30_000, 'the issuance error'));
    } finally {
      refused.release();
    }
    const { lastError, ...fields } = route.certificate!;
    console.log(`stranded: ${lastError}`);
    expect(fields).toEqual({ issuer: null, notBefore: null, notAfter: null, serial: null });
    // The CA's own words: pebble's problem and the refused connection of the challenge Caddy tried (either type).
    const httpChallenge = /challenge http-01 failed: HTTP 400 urn:ietf:params:acme:error:connection - .*127\.0\.0\.3:\d+: connect: connection refused/;
    const alpnChallenge = /challenge tls-alpn-01 failed: HTTP 403 urn:ietf:params:acme:error:unauthorized - Failed to connect to 127\.0\.0\.3:\d+ for the tls-alpn-01 challenge/;
    expect(lastError).toMatch(/^certificate issuance failed \(20\d\d-[^)]+\): /);
    expect([httpChallenge, alpnChallenge].some((r) => r.test(lastError!)), lastError!).toBe(true);
    // The first route kept its certificate, without error.
    expect((await routeOf(shop)).certificate).toMatchObject({ serial: opensslView(httpsPort, shop).serial, lastError: null });
  });

  it('a name whose DNS points elsewhere reads unknown, dns-elsewhere, within the bound; no certificate is asked for', async () => {
    await pebble.setAddress(elsewhere, '192.0.2.10');
    const attachedAt = Date.now();
    await attachRoute(panel, serviceId, elsewhere);
    const { route, took } = await until(elsewhere, (r) => r.health.evidence !== null, BOUND_MS + 1_000, 'a verdict');
    console.log(`dns-elsewhere in the API ${took} ms after the route was attached (bound ${BOUND_MS} ms)`);
    expect(took).toBeLessThanOrEqual(BOUND_MS);
    const text = `not probed, no certificate requested: ${elsewhere} resolves to 192.0.2.10, not to this host (127.0.0.1, 127.0.0.3)`;
    expect(route.health).toMatchObject({
      state: 'unknown',
      reason: `dns-elsewhere: ${text}`,
      evidence: { madeBy: 'none', status: null, notProbed: { reason: 'dns-elsewhere', resolved: ['192.0.2.10'], hostAddresses: ['127.0.0.1', '127.0.0.3'] } },
    });
    const at = Date.parse(route.health.evidence!.at);
    expect(at).toBeGreaterThanOrEqual(attachedAt - 5);
    expect(at).toBeLessThanOrEqual(Date.now());
    expect(route.certificate).toEqual({ issuer: null, notBefore: null, notAfter: null, serial: null, lastError: text });
  });

  it('none of it loaded Caddy after the first apply', async () => {
    expect(await caddyLoadCount(caddy.adminUrl)).toBe(loads);
  });
});
