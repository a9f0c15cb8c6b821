import { describe, expect, it } from 'vitest';
import { containerTarget, openOn, type UpstreamLoad } from '../../src/proxy/index.js';

// What a drain counts from Caddy's `GET /reverse_proxy/upstreams`, with the
// addresses Caddy 2.6.2 lists (measured: a dynamic SRV upstream is listed
// under its target with the trailing dot while a request to it is open; an
// `a` upstream under the address it dialled).

const loads: UpstreamLoad[] = [
  { address: 'c-aaaaaaaaaaaa.e.rt.tether.internal.:8080', numRequests: 2 },
  { address: 'c-aaaaaaaaaaaa.e.rt.tether.internal.:9090', numRequests: 1 },
  { address: 'c-bbbbbbbbbbbb.e.rt.tether.internal.:8080', numRequests: 5 },
  { address: 'svc-svc-a:8080', numRequests: 4 },
  { address: 'svc-svc-ab:8080', numRequests: 7 },
  { address: 'ip-127-0-0-1.e.rt.tether.internal.:9081', numRequests: 1 },
  { address: '172.18.0.5:8080', numRequests: 10 },
  { address: '[FD00::5]:8080', numRequests: 20 },
];

describe('openOn', () => {
  it('only the named containers, every port, by the first 12 characters of their id; never a service alias', () => {
    expect(containerTarget('AAAAAAAAAAAAffff')).toBe('c-aaaaaaaaaaaa.e.rt.tether.internal');
    expect(openOn(loads, ['aaaaaaaaaaaa0123456789'])).toBe(3);
    expect(openOn(loads, ['aaaaaaaaaaaa0123456789', 'bbbbbbbbbbbb99'])).toBe(8);
    expect(openOn(loads, ['cccccccccccc'])).toBe(0);
    expect(openOn([], ['aaaaaaaaaaaa'])).toBe(0);
  });

  it('a route looked up by address: the containers\' own addresses, IPv4 and IPv6, any case', () => {
    expect(openOn(loads, ['aaaaaaaaaaaa'], ['172.18.0.5'])).toBe(13);
    expect(openOn(loads, ['cccccccccccc'], ['fd00::5'])).toBe(20);
    expect(openOn(loads, ['cccccccccccc'], ['172.18.0.6'])).toBe(0);
  });
});
