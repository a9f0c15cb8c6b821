import { describe, expect, it } from 'vitest';
import type { RouteProbe } from '@tether/protocol';
import { freshRouteProbes, routeCertificate, routeHealth } from '../src/status/route-health.js';

// A route's health is read from a live session's probe, never kept: stale or
// missing evidence is `unknown`, whatever it said before.

const now = Date.parse('2026-12-02T10:00:00.000Z');
const probe = (over: Partial<RouteProbe> = {}): RouteProbe => ({
  domain: 'shop.example.com',
  pathPrefix: null,
  state: 'serving',
  at: new Date(now - 1_000).toISOString(),
  status: 200,
  madeBy: 'app',
  error: null,
  latencyMs: 7,
  ...over,
});
const live = (probes: RouteProbe[] | undefined, probeIntervalMs: number | undefined = 30_000) => ({
  sessionId: 's-1',
  routing: { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null, ...(probes ? { probes } : {}), ...(probeIntervalMs ? { probeIntervalMs } : {}) },
});
const route = { domain: 'shop.example.com', pathPrefix: null };

describe('routeHealth', () => {
  it('serving and failing from a fresh probe of the same domain and path prefix, with the session', () => {
    expect(routeHealth(route, live([probe()]), now)).toMatchObject({ state: 'serving', evidence: { status: 200, sessionId: 's-1' } });
    const failing = routeHealth(route, live([probe({ state: 'failing', status: 502, madeBy: 'proxy' })]), now);
    expect(failing).toMatchObject({ state: 'failing', reason: 'the proxy answered 502 after 7 ms' });
    const silent = routeHealth(route, live([probe({ state: 'failing', status: null, madeBy: 'none', error: 'no answer within 500 ms', latencyMs: 500 })]), now);
    expect(silent.reason).toBe('no answer (no answer within 500 ms) after 500 ms');
    // Another prefix of the same domain is another route.
    expect(routeHealth({ domain: 'shop.example.com', pathPrefix: '/api' }, live([probe()]), now).state).toBe('unknown');
  });

  it('unknown: no live session, no probes, not probed yet, or ended more than two intervals ago (exactly two still counts)', () => {
    expect(routeHealth(route, { why: 'node web-1 has no live session' }, now)).toEqual({ state: 'unknown', reason: 'node web-1 has no live session', evidence: null });
    expect(routeHealth(route, live(undefined, undefined), now).state).toBe('unknown');
    expect(routeHealth(route, live([]), now).reason).toBe('not probed yet by the agent of this node');
    // Started 60.007 s ago and answered after 7 ms: ended exactly two intervals ago.
    expect(routeHealth(route, live([probe({ at: new Date(now - 60_007).toISOString() })]), now).state).toBe('serving');
    const stale = routeHealth(route, live([probe({ at: new Date(now - 60_008).toISOString() })]), now);
    expect(stale).toEqual({ state: 'unknown', reason: `the last probe (${new Date(now - 60_008).toISOString()}, 7 ms) ended more than two probe intervals (60000 ms) ago`, evidence: null });
  });

  it('a slow failing probe counts from its end: the next one, due an interval after it ended, arrives in time', () => {
    // 1 s interval; the route has no upstream, so each probe waits out the proxy's retry window (about 700 ms).
    // Started 2.6 s ago and ended 1.9 s ago: the next one started 0.9 s ago and has not answered yet.
    const slow = probe({ state: 'failing', status: 503, madeBy: 'proxy', latencyMs: 700, at: new Date(now - 2_600).toISOString() });
    expect(routeHealth(route, live([slow], 1_000), now)).toMatchObject({ state: 'failing', reason: 'the proxy answered 503 after 700 ms' });
    // Its end more than two intervals ago: the agent missed its schedule.
    expect(routeHealth(route, live([{ ...slow, at: new Date(now - 2_701).toISOString() }], 1_000), now).state).toBe('unknown');
  });

  it('a route the agent did not probe because its DNS points elsewhere: unknown, dns-elsewhere, evidence names the addresses; kept out of the metrics', () => {
    const text = 'not probed, no certificate requested: shop.example.com resolves to 192.0.2.10, not to this host (198.51.100.7)';
    const notProbed = { reason: 'dns-elsewhere' as const, resolved: ['192.0.2.10'], hostAddresses: ['198.51.100.7'] };
    const skipped = probe({ state: 'failing', status: null, madeBy: 'none', error: text, latencyMs: 1, notProbed, certificate: { issuer: null, notBefore: null, notAfter: null, serial: null, lastError: text } });
    const health = routeHealth(route, live([skipped]), now);
    expect(health).toMatchObject({ state: 'unknown', reason: `dns-elsewhere: ${text}`, evidence: { notProbed, sessionId: 's-1', error: text } });
    expect(routeCertificate(route, live([skipped]))?.lastError).toBe(text);
    expect([...freshRouteProbes([{ id: 's-1', nodeName: 'web-1', report: live([skipped]) }], now)]).toEqual([]);
    // Stale (it ended 1 ms over two intervals ago), it is unknown for staleness, with no evidence.
    expect(routeHealth(route, live([{ ...skipped, at: new Date(now - 60_002).toISOString() }]), now).evidence).toBeNull();
  });

  it('the metrics see only what is fresh', () => {
    const sessions = [
      { id: 's-1', nodeName: 'web-1', report: live([probe(), probe({ domain: 'old.example.com', at: new Date(now - 120_000).toISOString() })]) },
      { id: 's-2', nodeName: 'web-2', report: null },
    ];
    expect([...freshRouteProbes(sessions, now)]).toEqual([{ node: 'web-1', domain: 'shop.example.com', pathPrefix: null, up: true, latencyMs: 7, certificate: null }]);
  });

  it('the certificate comes from the route\'s probe of a live session, kept out of the evidence', () => {
    const certificate = { issuer: 'CN=Test CA', notBefore: '2026-01-01T00:00:00.000Z', notAfter: '2026-04-01T00:00:00.000Z', serial: '1f', lastError: null };
    const withCert = live([probe({ certificate })]);
    expect(routeCertificate(route, withCert)).toEqual(certificate);
    expect(routeHealth(route, withCert, now).evidence).not.toHaveProperty('certificate');
    expect(routeCertificate(route, live([probe()]))).toBeNull();
    expect(routeCertificate(route, { why: 'no session' })).toBeNull();
  });
});
