import { describe, expect, it } from 'vitest';
import { serviceUpstream, type Route } from '@tether/protocol';
import { computeAnswers, isStaticShape, renderStaticConfig } from '../../src/proxy/index.js';
import { createAgentMetrics } from '../../src/metrics/agent-metrics.js';
import { addressSetName } from '../../src/proxy/static-answers.js';

// What the static proxy serves, without Caddy: the zone records and domain
// lists a map gives, which routes fall outside the static shape, and that
// the config never names a domain.

const r = (domain: string, upstream: string, pathPrefix: string | null = null, serviceId = `svc_${domain.split('.')[0]}`): Route => ({ domain, pathPrefix, serviceId, upstream });
/** An address set's records (`<set>.a A …`), sorted as the answers sort them. */
const setRecords = (...addresses: string[]) => addresses.map((a) => `${addressSetName(addresses)}.a ${a}`).sort();
const local = addressSetName(['A 127.0.0.1']);

describe('static answers', () => {
  it('names hosts and first segments, points service aliases at ready containers and IPs at themselves', () => {
    const endpoints = new Map([['svc_shop', [{ id: 'abcdef0123456789', ip: '172.18.0.5' }, { id: '0123456789abcdef', ip: '172.18.0.6' }]]]);
    const a = computeAnswers(
      [
        r('shop.example.test', serviceUpstream('shop', 8080)),
        r('shop.example.test', '127.0.0.1:9000', '/api', 'svc_api'),
        r('shop.example.test', '127.0.0.1:9001', '/api/v1/a_b-c', 'svc_deep'),
        r('idle.example.test', serviceUpstream('idle', 80)),
      ],
      endpoints,
    );
    const shop = addressSetName(['A 172.18.0.5', 'A 172.18.0.6']);
    expect(a.records).toEqual([
      'health A 127.0.0.1',
      '_a_b-c._v1._api.shop.example.test.h SRV 10 10 9001 ip-127-0-0-1.e',
      '_api.shop.example.test.h SRV 10 10 9000 ip-127-0-0-1.e',
      'shop.example.test.h SRV 10 10 8080 c-0123456789ab.e',
      'shop.example.test.h SRV 10 10 8080 c-abcdef012345.e',
      'c-0123456789ab.e A 172.18.0.6',
      'c-abcdef012345.e A 172.18.0.5',
      'ip-127-0-0-1.e A 127.0.0.1',
      // One port serves each route: its address set has a name of its own (Caddy's `a` source), shared by routes.
      ...[...setRecords('A 127.0.0.1'), ...setRecords('A 172.18.0.5', 'A 172.18.0.6')].sort(),
    ]);
    expect(a.domains).toEqual(['idle.example.test', 'shop.example.test']);
    expect(a.prefixed).toEqual(['shop.example.test']);
    // Every route can be looked up by SRV; those one port serves by address on that port (an unserved one: SRV only).
    expect(a.lookups).toEqual([
      `_a_b-c._v1._api.shop.example.test/9001-${local}`,
      '_a_b-c._v1._api.shop.example.test/srv',
      `_api.shop.example.test/9000-${local}`,
      '_api.shop.example.test/srv',
      'idle.example.test/srv',
      `shop.example.test/8080-${shop}`,
      'shop.example.test/srv',
    ]);
    expect(a.unserved).toBe(1);
    expect(a.legacy).toEqual([]);
    // Same inputs in another order: same digest (nothing to write).
    const reordered = [
      r('shop.example.test', '127.0.0.1:9001', '/API/v1/a_b-c/', 'svc_deep'),
      r('idle.example.test', serviceUpstream('idle', 80)),
      r('shop.example.test', '127.0.0.1:9000', '/api', 'svc_api'),
      r('shop.example.test', serviceUpstream('shop', 8080)),
    ];
    // An older panel's stored form (upper case, trailing `/`) is the same route.
    expect(computeAnswers(reordered, endpoints).digest).toBe(a.digest);
    // A redeploy (another container) changes the answers.
    expect(computeAnswers([r('shop.example.test', serviceUpstream('shop', 8080))], new Map([['svc_shop', [{ id: 'ffff', ip: '172.18.0.9' }]]])).digest).not.toBe(a.digest);
  });

  it('an address set is named by its content: shared by the routes it serves, renamed when it changes', () => {
    const route = (domain: string) => r(domain, serviceUpstream('shop', 8080), null, 'svc_shop');
    const at = (...ips: string[]) => computeAnswers([route('a.example.test'), route('b.example.test')], new Map([['svc_shop', ips.map((ip, i) => ({ id: `${i}`.repeat(12), ip }))]]));
    const two = at('172.18.0.5', '172.18.0.6');
    const set = addressSetName(['A 172.18.0.6', 'A 172.18.0.5']);
    expect(two.lookups).toEqual([`a.example.test/8080-${set}`, 'a.example.test/srv', `b.example.test/8080-${set}`, 'b.example.test/srv']);
    expect(two.records.filter((x) => x.includes('.a '))).toEqual(setRecords('A 172.18.0.5', 'A 172.18.0.6'));
    // The same addresses in another order: the same name. A redeploy: another file, so Caddy asks at once.
    expect(at('172.18.0.6', '172.18.0.5').lookups).toEqual(two.lookups);
    expect(at('172.18.0.7').lookups[0]).toBe(`a.example.test/8080-${addressSetName(['A 172.18.0.7'])}`);
  });

  it('a container out of the picks (draining, health not passed) keeps its A record while it runs, never an SRV', () => {
    // Caddy cached the SRV answer naming the old container before the switch and resolves that target per dial:
    // without its A record every request in the refresh window failed 502 while the old container still ran.
    const route = r('shop.example.test', serviceUpstream('shop', 8080));
    const both = new Map([['svc_shop', [{ id: 'aaaaaaaaaaaa0000', ip: '172.18.0.5' }, { id: 'bbbbbbbbbbbb0000', ip: '172.18.0.6', serving: false }]]]);
    const a = computeAnswers([route], both);
    expect(a.records).toEqual([
      'health A 127.0.0.1',
      'shop.example.test.h SRV 10 10 8080 c-aaaaaaaaaaaa.e',
      'c-aaaaaaaaaaaa.e A 172.18.0.5',
      'c-bbbbbbbbbbbb.e A 172.18.0.6',
      ...setRecords('A 172.18.0.5'),
    ]);
    expect(a.unserved).toBe(0);
    const onlyLeaving = computeAnswers([route], new Map([['svc_shop', [{ id: 'bbbbbbbbbbbb0000', ip: '172.18.0.6', serving: false }]]]));
    expect(onlyLeaving.records).toEqual(['health A 127.0.0.1', 'c-bbbbbbbbbbbb.e A 172.18.0.6']);
    expect(onlyLeaving.unserved).toBe(1);
  });

  describe('routing.remote: other nodes\' replicas', () => {
    const remote = [{ node: 'edge-2', endpoint: '10.0.0.2:32768' }, { node: 'edge-3', endpoint: '[fd00::3]:32769' }];
    const shop = { ...r('shop.example.test', serviceUpstream('shop', 8080)), remote };
    const local = new Map([['svc_shop', [{ id: 'aaaaaaaaaaaa0000', ip: '172.18.0.5' }]]]);
    const remoteRecords = ['r-10-0-0-2-32768.e A 10.0.0.2', 'r-fd00--3-32769.e AAAA fd00::3'];

    it('local first: while a local replica serves, SRV names it alone (the remote targets keep their address records)', () => {
      const a = computeAnswers([shop], local);
      expect(a.records).toEqual(['health A 127.0.0.1', 'shop.example.test.h SRV 10 10 8080 c-aaaaaaaaaaaa.e', 'c-aaaaaaaaaaaa.e A 172.18.0.5', ...remoteRecords, ...setRecords('A 172.18.0.5')]);
      expect(a.lookups).toEqual([`shop.example.test/8080-${addressSetName(['A 172.18.0.5'])}`, 'shop.example.test/srv']);
      expect(a.unserved).toBe(0);
    });

    it('no local replica serving (none, or only a leaving one): the remote endpoints, each on its own port', () => {
      const expected = [
        'health A 127.0.0.1',
        'shop.example.test.h SRV 10 10 32768 r-10-0-0-2-32768.e',
        'shop.example.test.h SRV 10 10 32769 r-fd00--3-32769.e',
        ...remoteRecords,
      ];
      expect(computeAnswers([shop], new Map()).records).toEqual(expected);
      // Two ports: no address records at the owner, SRV lookups only.
      expect(computeAnswers([shop], new Map()).lookups).toEqual(['shop.example.test/srv']);
      const leaving = computeAnswers([shop], new Map([['svc_shop', [{ id: 'aaaaaaaaaaaa0000', ip: '172.18.0.5', serving: false }]]]));
      expect(leaving.records).toEqual([...expected.slice(0, 3), 'c-aaaaaaaaaaaa.e A 172.18.0.5', ...remoteRecords]);
      expect(leaving.unserved).toBe(0);
    });

    it('an endpoint failing the probe is dropped, records and all; every one failing leaves the route unserved', () => {
      const one = computeAnswers([shop], new Map(), { failingRemote: new Set(['10.0.0.2:32768']) });
      expect(one.records).toEqual(['health A 127.0.0.1', 'shop.example.test.h SRV 10 10 32769 r-fd00--3-32769.e', 'r-fd00--3-32769.e AAAA fd00::3', ...setRecords('AAAA fd00::3')]);
      expect(one.lookups).toEqual([`shop.example.test/32769-${addressSetName(['AAAA fd00::3'])}`, 'shop.example.test/srv']);
      const none = computeAnswers([shop], new Map(), { failingRemote: new Set(remote.map((e) => e.endpoint)) });
      expect(none.records).toEqual(['health A 127.0.0.1']);
      expect(none.unserved).toBe(1);
      expect(new Set([one.digest, none.digest, computeAnswers([shop], new Map()).digest]).size).toBe(3);
    });

    it('deterministic: the remote list in any order, a failing set naming endpoints of no route, same digest; an IP upstream ignores remote', () => {
      const a = computeAnswers([shop], new Map());
      expect(computeAnswers([{ ...shop, remote: [...remote].reverse() }], new Map(), { failingRemote: new Set(['10.9.9.9:1']) }).digest).toBe(a.digest);
      const ip = { ...r('ip.example.test', '127.0.0.1:9000'), remote };
      expect(computeAnswers([ip], new Map()).records).toEqual(['health A 127.0.0.1', 'ip.example.test.h SRV 10 10 9000 ip-127-0-0-1.e', 'ip-127-0-0-1.e A 127.0.0.1', ...setRecords('A 127.0.0.1')]);
    });
  });

  it('keeps routes outside the shape for the reload-costing path', () => {
    for (const prefix of [null, '/', '/api', '/api/', '/API', '/api/v1', '/a_b-c', '/a/b/c', `/${'s'.repeat(62)}`]) {
      expect(isStaticShape({ domain: 'a.example.test', pathPrefix: prefix }), String(prefix)).toBe(true);
    }
    for (const prefix of ['/a/b/c/d', '/a.b', '//a', '/a//b', `/${'s'.repeat(63)}`, 'api', '/a b']) {
      expect(isStaticShape({ domain: 'a.example.test', pathPrefix: prefix }), prefix).toBe(false);
    }
    // 253 less `.h.rt.tether.internal` (21) for the whole domain; each segment takes its length and 2 more.
    const at = (n: number) => `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(n - 3 * 64)}`;
    expect(isStaticShape({ domain: at(232), pathPrefix: null })).toBe(true);
    expect(isStaticShape({ domain: at(233), pathPrefix: null })).toBe(false);
    expect(isStaticShape({ domain: at(227), pathPrefix: '/abc' })).toBe(true);
    expect(isStaticShape({ domain: at(228), pathPrefix: '/abc' })).toBe(false);
    const deep = r('a.example.test', '127.0.0.1:1', '/api/v1/x/y');
    const a = computeAnswers([deep, r('a.example.test', '127.0.0.1:2')], new Map());
    expect(a.legacy).toEqual([deep]);
    expect(a.records).toEqual(['health A 127.0.0.1', 'a.example.test.h SRV 10 10 2 ip-127-0-0-1.e', 'ip-127-0-0-1.e A 127.0.0.1', `${local}.a A 127.0.0.1`]);
  });

  it('the static config names no domain of the map: it is made from settings only', () => {
    const o = {
      admin: { listen: '127.0.0.1:2019' },
      httpPort: 80,
      httpsPort: 443,
      tls: 'auto' as const,
      answerer: 'udp/127.0.0.1:5399',
      lookupRefreshMs: 1000,
      answersDir: '/state/answers',
      askPort: 9082,
      issuer: 'internal' as const,
    };
    const plain = renderStaticConfig(o);
    expect(plain.json).not.toContain('example.test');
    expect(plain.json).toContain('"on_demand":true');
    expect(renderStaticConfig(o).json).toBe(plain.json);
    expect(renderStaticConfig({ ...o, lookupRefreshMs: 2000 }).id).not.toBe(plain.id);
  });

  it('one lookup spreads round robin and retries a failed dial on the next target; the case-blind multi lookups keep first, without retries', () => {
    const o = { admin: { listen: '127.0.0.1:2019' }, httpPort: 80, httpsPort: 443, tls: 'off' as const, answerer: 'udp/127.0.0.1:5399', lookupRefreshMs: 1000, answersDir: '/state/answers', askPort: 9082, issuer: 'internal' as const };
    type Proxy = { handler: string; dynamic_upstreams: { source: string }; load_balancing: Record<string, unknown>; transport: Record<string, unknown> };
    const proxies: Proxy[] = [];
    JSON.stringify(JSON.parse(renderStaticConfig(o).json), (_key, value: unknown) => {
      if ((value as Proxy | null)?.handler === 'reverse_proxy') proxies.push(value as Proxy);
      return value;
    });
    const single = proxies.filter((p) => p.dynamic_upstreams.source === 'srv');
    const multi = proxies.filter((p) => p.dynamic_upstreams.source === 'multi');
    expect(single.length).toBeGreaterThanOrEqual(4);
    expect(multi.length).toBe(3);
    for (const p of single) expect(p.load_balancing).toEqual({ selection_policy: { policy: 'round_robin' }, try_duration: '700ms', try_interval: '100ms' });
    for (const p of multi) expect(p.load_balancing).toEqual({ selection_policy: { policy: 'first' } });
    for (const p of proxies) expect(p.transport).toMatchObject({ protocol: 'http', dial_timeout: '500ms' });
  });

  it('the answerer shows in the agent metrics', async () => {
    const health = { up: false, starts: 2, restarts: 1, lastFailure: 'x', lastFailureAt: null, unserved: 3, legacy: 0 };
    const registry = createAgentMetrics({ connection: { state: 'ready', on: () => undefined } as never, routing: () => ({ appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null }), answerer: () => health });
    const text = await registry.metrics();
    expect(text).toMatch(/^tether_agent_proxy_answerer_up 0$/m);
    expect(text).toMatch(/^tether_agent_proxy_answerer_restarts_total 1$/m);
    expect(text).toMatch(/^tether_agent_proxy_routes_unserved 3$/m);
    health.up = true;
    expect(await registry.metrics()).toMatch(/^tether_agent_proxy_answerer_up 1$/m);
  });
});
