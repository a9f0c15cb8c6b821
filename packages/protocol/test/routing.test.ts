import { describe, expect, it } from 'vitest';
import { canonicalRoutes, routingHash, serviceUpstream, serviceUpstreamHost, type Route } from '../src/index.js';

const a: Route = { domain: 'a.example.com', pathPrefix: null, serviceId: 's1', upstream: 'svc-s1:80' };
const b: Route = { domain: 'b.example.com', pathPrefix: '/api', serviceId: 's2', upstream: 'svc-s2:80' };
const b2: Route = { domain: 'b.example.com', pathPrefix: null, serviceId: 's3', upstream: 'svc-s3:80' };

describe('routing hash', () => {
  it('does not depend on the order routes or keys arrive in', () => {
    const shuffledKeys = { upstream: a.upstream, serviceId: a.serviceId, pathPrefix: null, domain: a.domain };
    expect(routingHash([a, b, b2])).toBe(routingHash([b2, shuffledKeys, b]));
  });

  it('changes when any field changes', () => {
    const base = routingHash([a, b]);
    expect(routingHash([a, { ...b, pathPrefix: '/v2' }])).not.toBe(base);
    expect(routingHash([a, { ...b, upstream: 'svc-s2:81' }])).not.toBe(base);
    expect(routingHash([a])).not.toBe(base);
  });

  it('orders by domain, then the more specific path prefix first', () => {
    expect(canonicalRoutes([b2, a, b]).map((r) => [r.domain, r.pathPrefix])).toEqual([
      ['a.example.com', null],
      ['b.example.com', '/api'],
      ['b.example.com', null],
    ]);
  });
});

describe('service upstream', () => {
  it('depends only on the service id and is a valid host name', () => {
    expect(serviceUpstreamHost('Svc_01')).toBe('svc-svc-01');
    expect(serviceUpstream('abc', 8080)).toBe('svc-abc:8080');
    expect(serviceUpstreamHost('cm1x7k2p00001')).toMatch(/^[a-z0-9-]+$/);
  });
});
