import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DnsCheck, dnsVerdict, interfaceAddresses, RouteProber, type DnsVerdict } from '../../src/route-probes/index.js';
import { normalizeAddress } from '../../src/route-probes/dns-check.js';
import { silentLogger } from '../proxy/helpers/harness.js';

// The DNS decision before a TLS probe under the ACME issuer (no I/O: lookups
// are given), and the prober's use of it: a name that does not point here is
// never handshaked, and its status says why.

const here = ['198.51.100.7', '2001:db8::7'];

describe('dnsVerdict', () => {
  it('probes when any A or AAAA address is one of the host\'s (IPv6 in any spelling)', () => {
    expect(dnsVerdict('shop.example.com', { addresses: ['192.0.2.10', '198.51.100.7'], error: null }, here)).toEqual({ probe: true });
    expect(dnsVerdict('shop.example.com', { addresses: ['2001:DB8:0:0::7'], error: null }, here)).toEqual({ probe: true });
    // A lookup that failed for one family still decides by what the other found.
    expect(dnsVerdict('shop.example.com', { addresses: ['198.51.100.7'], error: 'queryAaaa ETIMEOUT shop.example.com' }, here)).toEqual({ probe: true });
  });

  it('dns-elsewhere: the addresses, sorted and once each, and the host\'s, in the notProbed fields and the text', () => {
    const v = dnsVerdict('shop.example.com', { addresses: ['192.0.2.11', '192.0.2.10', '192.0.2.11'], error: null }, here) as Extract<DnsVerdict, { probe: false }>;
    expect(v.probe).toBe(false);
    expect(v.notProbed).toEqual({ reason: 'dns-elsewhere', resolved: ['192.0.2.10', '192.0.2.11'], hostAddresses: ['198.51.100.7', '2001:db8::7'] });
    expect(v.text).toBe('not probed, no certificate requested: shop.example.com resolves to 192.0.2.10, 192.0.2.11, not to this host (198.51.100.7, 2001:db8::7)');
  });

  it('no record at all is elsewhere too; a failed lookup is dns-error; a host without addresses probes nothing', () => {
    const none = dnsVerdict('new.example.com', { addresses: [], error: null }, here) as Extract<DnsVerdict, { probe: false }>;
    expect(none.notProbed.reason).toBe('dns-elsewhere');
    expect(none.text).toContain('new.example.com has no A or AAAA record');
    const failed = dnsVerdict('new.example.com', { addresses: [], error: 'queryA ESERVFAIL new.example.com' }, here) as Extract<DnsVerdict, { probe: false }>;
    expect(failed.notProbed.reason).toBe('dns-error');
    expect(failed.text).toContain('the DNS lookup of new.example.com failed (queryA ESERVFAIL new.example.com)');
    expect(dnsVerdict('shop.example.com', { addresses: ['198.51.100.7'], error: null }, []).probe).toBe(false);
    // Found elsewhere while the other family failed: elsewhere, the failure mentioned.
    const half = dnsVerdict('shop.example.com', { addresses: ['192.0.2.10'], error: 'queryAaaa ESERVFAIL shop.example.com' }, here) as Extract<DnsVerdict, { probe: false }>;
    expect(half.notProbed.reason).toBe('dns-elsewhere');
    expect(half.text).toContain('resolves to 192.0.2.10 (a lookup failed: queryAaaa ESERVFAIL shop.example.com), not to this host');
  });

  it('normalizes IPv6 and leaves IPv4 alone; interfaces without loopback and link-local', () => {
    expect(normalizeAddress('2001:DB8:0000::1')).toBe('2001:db8::1');
    expect(normalizeAddress('192.0.2.1')).toBe('192.0.2.1');
    const nic = (address: string, family: 'IPv4' | 'IPv6', internal = false) => ({ address, family, internal, netmask: '', mac: '', cidr: null, ...(family === 'IPv6' ? { scopeid: 0 } : {}) }) as never;
    expect(interfaceAddresses({ lo: [nic('127.0.0.1', 'IPv4', true), nic('::1', 'IPv6', true)], eth0: [nic('198.51.100.7', 'IPv4'), nic('fe80::1', 'IPv6'), nic('2001:db8::7', 'IPv6')] })).toEqual(['198.51.100.7', '2001:db8::7']);
  });
});

describe('DnsCheck', () => {
  it('reuses an answer for cacheMs (exactly cacheMs later it asks again) and reads the host\'s addresses it was given', async () => {
    let clock = 0;
    const asked: string[] = [];
    const check = new DnsCheck({
      server: null,
      cacheMs: 1_000,
      timeoutMs: 100,
      publicAddresses: here,
      now: () => clock,
      lookup: async (d) => (asked.push(d), { addresses: ['198.51.100.7'], error: null }),
    });
    expect((await check.check('a.example.com')).probe).toBe(true);
    clock = 999;
    await check.check('a.example.com');
    expect(asked).toEqual(['a.example.com']);
    clock = 1_000;
    await check.check('a.example.com');
    expect(asked).toEqual(['a.example.com', 'a.example.com']);
  });
});

describe('RouteProber with a DNS check', () => {
  let server: net.Server;
  let port: number;
  let connections = 0;
  beforeAll(async () => {
    server = net.createServer((s) => (connections++, s.destroy()));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const prober = (verdict: DnsVerdict, tls = true) =>
    new RouteProber({
      intervalMs: 60_000,
      timeoutMs: 1_000,
      ratePerSecond: 20,
      target: async () => ({ host: '127.0.0.1', port, tls }),
      logger: silentLogger,
      dnsCheck: async () => verdict,
    });

  it('a name that does not point here is never connected to: failing/none with notProbed, the certificate says no certificate is requested', async () => {
    const v = dnsVerdict('far.example.com', { addresses: ['192.0.2.10'], error: null }, here);
    const p = prober(v);
    p.setRoutes([{ domain: 'far.example.com', pathPrefix: null }]);
    await p.probeNext();
    expect(connections).toBe(0);
    const [probe] = p.results();
    const text = (v as Extract<DnsVerdict, { probe: false }>).text;
    expect(probe).toMatchObject({ state: 'failing', madeBy: 'none', status: null, error: text, notProbed: { reason: 'dns-elsewhere', resolved: ['192.0.2.10'] } });
    expect(probe!.certificate).toEqual({ issuer: null, notBefore: null, notAfter: null, serial: null, lastError: text });
  });

  it('a name that points here is probed (the connection is made); plain HTTP never asks DNS', async () => {
    const p = prober({ probe: true });
    p.setRoutes([{ domain: 'near.example.com', pathPrefix: null }]);
    await p.probeNext();
    expect(connections).toBe(1);
    expect(p.results()[0]!.notProbed).toBeUndefined();
    const plain = prober(dnsVerdict('far.example.com', { addresses: [], error: null }, here), false);
    plain.setRoutes([{ domain: 'far.example.com', pathPrefix: null }]);
    await plain.probeNext();
    expect(connections).toBe(2);
  });
});
