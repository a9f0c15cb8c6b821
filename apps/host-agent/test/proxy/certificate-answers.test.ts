import { describe, expect, it } from 'vitest';
import { serviceUpstream, type Route } from '@tether/protocol';
import { computeAnswers, renderStaticConfig } from '../../src/proxy/index.js';
import { caddyIssuerKey } from '../../src/proxy/certificate-storage.js';
import { issuedHere } from '../../src/proxy/certificate-share.js';

// certificates.share without Caddy: what `ask` allows and where challenges go
// for a domain another node issues, and that a map without issuers answers
// (and digests) as before.

const plain: Route = { domain: 'shop.example.test', pathPrefix: null, serviceId: 'svc_shop', upstream: serviceUpstream('shop', 8080) };
const elsewhere: Route = { ...plain, certificateIssuer: { node: 'edge-1', challengeVia: '10.0.0.1:80' } };
const endpoints = new Map([['svc_shop', [{ id: 'abcdef0123456789', ip: '172.18.0.5' }]]]);

describe('answers of a domain another node issues', () => {
  it('ask refuses it until its certificate is in place; its challenges are named at the issuer', () => {
    const before = computeAnswers([elsewhere], endpoints);
    expect(before.domains).toEqual([]);
    expect(before.challenges).toEqual(['shop.example.test']);
    expect(before.records).toContain('shop.example.test.c SRV 10 10 80 r-10-0-0-1-80.e');
    expect(before.records).toContain('r-10-0-0-1-80.e A 10.0.0.1');
    const after = computeAnswers([elsewhere], endpoints, { sharedInPlace: new Set(['shop.example.test']) });
    expect(after.domains).toEqual(['shop.example.test']);
    expect(after.digest).not.toBe(before.digest);
  });

  it('a map without issuers: no challenges, the domain allowed, the digest of before the capability', () => {
    const a = computeAnswers([plain], endpoints, { sharedInPlace: new Set() });
    expect(a.challenges).toEqual([]);
    expect(a.domains).toEqual(['shop.example.test']);
    expect(a.digest).toBe(computeAnswers([plain], endpoints).digest);
    expect(issuedHere([plain, { ...elsewhere, domain: 'b.example.test' }])).toEqual(['shop.example.test']);
  });

  it("certmagic's storage key of the issuer: CA host and path, `:` and `/` as `-`; Let's Encrypt by default; `local` for Caddy's own CA", () => {
    expect(caddyIssuerKey({ issuer: 'acme', acmeCa: 'https://127.0.0.1:14000/dir' })).toBe('127.0.0.1-14000-dir');
    expect(caddyIssuerKey({ issuer: 'acme', acmeCa: null })).toBe('acme-v02.api.letsencrypt.org-directory');
    expect(caddyIssuerKey({ issuer: 'internal' })).toBe('local');
  });

  it('the static config forwards challenges and drops TLS-ALPN only when sharing is on (turning it on costs one load)', () => {
    const base = { admin: { listen: '127.0.0.1:2019' }, httpPort: 80, httpsPort: 443, tls: 'auto' as const, answerer: 'udp/127.0.0.1:5353', lookupRefreshMs: 1000, answersDir: '/a', askPort: 9, issuer: 'acme' as const };
    const off = renderStaticConfig(base);
    const on = renderStaticConfig({ ...base, shareCertificates: true });
    expect(off.json).not.toContain('acme-challenge');
    expect(off.json).not.toContain('tls-alpn');
    expect(on.json).toContain('/a/challenges');
    expect(on.json).toContain('{http.request.host}.c.rt.tether.internal');
    expect(on.json).toContain('"tls-alpn":{"disabled":true}');
    expect(on.id).not.toBe(off.id);
    expect(renderStaticConfig({ ...base, shareCertificates: true }).json).toBe(on.json);
  });
});
