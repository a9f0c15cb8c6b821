import { existsSync, readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { caddyLoadCount, ensureCaddy, ensureKnot, ensurePebble, freePort, opensslView, startCaddy, startPebble, waitFor, type TestCaddy, type TestPebble } from '@tether/testkit';
import type { Route } from '@tether/protocol';
import type { StaticRoutingController } from '../../src/proxy/index.js';
import type { IssuedCertificate } from '../../src/proxy/certificate-share.js';
import { CHALLENGE_FORWARDED_HEADER } from '../../src/proxy/static-render.js';
import { mapOf, removeTempDirs, route, startNamedServer, tempDir } from '../proxy/helpers/harness.js';
import { handshake, staticController } from '../proxy/helpers/static-harness.js';

// One certificate issuer per domain (certificates.share) with real parts: two
// Caddys, each with its agent's static controller, and pebble validating
// HTTP-01 on B's HTTP port only (pebble-challtestsrv names 127.0.0.1 for
// every name, and its HTTP-01 port is B's): the CA always reaches the node
// that did not order, as it does when DNS names only a non-issuer.
// - B, whose route names A as the issuer, refuses the name before it has the
//   certificate: no handshake succeeds, B's Caddy never made an ACME account;
// - A obtains the certificate on demand, B forwarding the CA's challenge to
//   A; A's controller finds it for the panel (with its key and notAfter), once;
// - B given that certificate serves it (same serial), still without any ACME
//   account of its own; a challenge already forwarded is not forwarded again;
// - none of it loads either Caddy.

const ready = (await ensureCaddy()).available && (await ensureKnot()).available && (await ensurePebble()).available;
const DOMAIN = 'shop.share.test';

describe.skipIf(!ready)('one certificate issuer per domain (real Caddy x2, pebble, forwarded HTTP-01)', () => {
  let a: TestCaddy;
  let b: TestCaddy;
  let pebble: TestPebble;
  let issuer: StaticRoutingController;
  let other: StaticRoutingController;
  let shop: Awaited<ReturnType<typeof startNamedServer>>;
  let aHttps: number;
  let bHttps: number;
  let loads: [number, number];
  let issued: IssuedCertificate[] = [];
  const bLog: string[] = [];
  const storage = (c: TestCaddy) => path.join(c.dataDir, 'caddy');
  const bAnswers = { dir: '' };

  const controllerFor = async (caddy: TestCaddy, httpsPort: number) => {
    const stateDir = await tempDir();
    const controller = await staticController({
      adminUrl: caddy.adminUrl,
      adminListen: `127.0.0.1:${caddy.adminPort}`,
      stateDir,
      httpPort: caddy.httpPort,
      serving: { tls: 'auto', httpPort: caddy.httpPort, httpsPort, acmeCa: pebble.directory, acmeCaRoot: pebble.caRoot, shareCertificates: true },
      issuer: 'acme',
      certificateStorage: storage(caddy),
    });
    await controller.start();
    return { controller, answersDir: path.join(stateDir, 'answers') };
  };

  beforeAll(async () => {
    [a, b] = await Promise.all([startCaddy(), startCaddy()]);
    b.process.stderr?.on('data', (c: Buffer) => bLog.push(...c.toString().split('\n')));
    [aHttps, bHttps] = await Promise.all([freePort(), freePort()]);
    pebble = await startPebble({ httpPort: b.httpPort });
    shop = await startNamedServer('shop');
    issuer = (await controllerFor(a, aHttps)).controller;
    const made = await controllerFor(b, bHttps);
    other = made.controller;
    bAnswers.dir = made.answersDir;
    loads = [await caddyLoadCount(a.adminUrl), await caddyLoadCount(b.adminUrl)];
  }, 60_000);

  afterAll(async () => {
    for (const c of [issuer, other]) {
      await c?.stop();
      await c?.knot.destroy();
    }
    await shop?.close();
    await pebble?.stop();
    await a?.stop();
    await b?.stop();
    await removeTempDirs();
  });

  const upstream = () => `127.0.0.1:${shop.port}`;
  const elsewhere = (): Route => ({ ...route(DOMAIN, upstream()), certificateIssuer: { node: 'a', challengeVia: `127.0.0.1:${a.httpPort}` } });

  it('(a) the node whose route names another issuer refuses the name before it has the certificate: no handshake, no ACME account', async () => {
    expect((await other.apply(mapOf([elsewhere()]))).error).toBeNull();
    expect(readdirSync(path.join(bAnswers.dir, 'domains'))).toEqual([]);
    expect(readdirSync(path.join(bAnswers.dir, 'challenges'))).toEqual([DOMAIN]);
    const refused = await handshake(bHttps, DOMAIN);
    expect(refused.ok).toBe(false);
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(path.join(storage(b), 'acme'))).toBe(false);
    expect(bLog.filter((l) => l.includes('obtaining'))).toEqual([]);
  });

  it('(b) the issuer obtains it on demand, the CA\'s challenge forwarded by the other node; the controller finds it for the panel once', async () => {
    expect((await issuer.apply(mapOf([route(DOMAIN, upstream())]))).error).toBeNull();
    expect(await issuer.unreportedCertificates()).toEqual([]);
    const started = Date.now();
    const view = opensslView(aHttps, DOMAIN);
    const issuanceMs = Date.now() - started;
    expect(view.issuer).toMatch(/Pebble Intermediate CA/);
    expect(issuanceMs).toBeLessThan(10_000);
    console.log(`issuance through a forwarded challenge: ${issuanceMs} ms`);
    // B's Caddy did not know the challenge and passed it to its routes, which forwarded it to A.
    await waitFor(() => bLog.some((l) => l.includes('no information found to solve challenge')), { timeoutMs: 2_000 });
    await waitFor(async () => (issued = await issuer.unreportedCertificates()).length === 1, { timeoutMs: 5_000 });
    const [found] = issued;
    expect(found!.certificate.domain).toBe(DOMAIN);
    expect(found!.certificate.certificatePem).toMatch(/^-----BEGIN CERTIFICATE-----\n/);
    expect(found!.certificate.keyPem).toMatch(/^-----BEGIN (EC )?PRIVATE KEY-----\n/);
    expect(found!.certificate.notAfter).toBe(view.notAfter);
    issuer.certificates!.markReported(issued);
    expect(await issuer.unreportedCertificates()).toEqual([]);
  }, 30_000);

  it('(c) the other node given that certificate serves it (same serial) without ever asking the CA', async () => {
    const started = Date.now();
    expect(await other.installCertificates(issued.map((i) => i.certificate))).toEqual({ failed: [] });
    expect(readdirSync(path.join(bAnswers.dir, 'domains'))).toEqual([DOMAIN]);
    const view = opensslView(bHttps, DOMAIN);
    const servedMs = Date.now() - started;
    console.log(`shared certificate served by the other node ${servedMs} ms after it arrived`);
    expect(servedMs).toBeLessThan(3_000);
    expect(view).toEqual(opensslView(aHttps, DOMAIN));
    expect(existsSync(path.join(storage(b), 'acme'))).toBe(false);
    expect(bLog.filter((l) => l.includes('obtaining'))).toEqual([]);
    // The key is written for its owner only.
    const keyFile = path.join(storage(b), 'certificates', readdirSync(path.join(storage(b), 'certificates'))[0]!, DOMAIN, `${DOMAIN}.key`);
    expect(readFileSync(keyFile, 'utf8')).toBe(issued[0]!.certificate.keyPem);
  }, 30_000);

  it('(d) a certificate that is not the key\'s or not the domain\'s is refused and leaves what serves in place', async () => {
    const good = issued[0]!.certificate;
    const result = await other.installCertificates([{ ...good, domain: 'other.share.test' }]);
    expect(result).toEqual({ failed: ['other.share.test'] });
    // The set sent no longer holds DOMAIN: ask refuses it again (the files stay, Caddy keeps serving the one it loaded).
    expect(readdirSync(path.join(bAnswers.dir, 'domains'))).toEqual([]);
    expect((await other.installCertificates([good])).failed).toEqual([]);
    expect(readdirSync(path.join(bAnswers.dir, 'domains'))).toEqual([DOMAIN]);
  });

  it('(e) a challenge already forwarded is not forwarded again; neither Caddy was loaded', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.get({ port: b.httpPort, host: '127.0.0.1', path: '/.well-known/acme-challenge/abc', headers: { host: DOMAIN, [CHALLENGE_FORWARDED_HEADER]: '1' } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
    });
    expect(status).toBe(404);
    expect([await caddyLoadCount(a.adminUrl), await caddyLoadCount(b.adminUrl)]).toEqual(loads);
  });
});
