import { describe, expect, it } from 'vitest';
import type { RouteProbe, RoutingStatus } from '@tether/protocol';
import { routeServing } from '../src/status/route-serving.js';
import type { LiveRouting, RouteNode } from '../src/status/route-health.js';
import type { ServingNodeRow } from '../src/routing/serving-nodes.js';

// A route's health across the nodes serving it (issue 37), as a pure
// presenter: each node's verdict from its own live probe, the route serving
// while any node serves it.

const NOW = Date.parse('2026-12-05T00:00:10.000Z');
const route = { domain: 'shop.example.com', pathPrefix: null };
const home: RouteNode = { id: 'n-home', name: 'home' };

const probe = (state: 'serving' | 'failing', extra: Partial<RouteProbe> = {}): RouteProbe => ({
  ...route,
  state,
  at: '2026-12-05T00:00:09.000Z',
  status: state === 'serving' ? 200 : 502,
  madeBy: state === 'serving' ? 'app' : 'proxy',
  error: null,
  latencyMs: 3,
  ...extra,
});
const routing = (probes: RouteProbe[]): RoutingStatus => ({ appliedHash: 'h', reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null, probes, probeIntervalMs: 5_000 });
const row = (name: string, role: ServingNodeRow['role'] = 'replica'): ServingNodeRow => ({ service_id: 's', node_id: `n-${name}`, node_name: name, private_address: `10.0.0.${name.length}`, role });
const liveOf = (byName: Record<string, LiveRouting>) => (node: RouteNode) => byName[node.name] ?? { why: `node ${node.name} has no live session` };

describe('route health across serving nodes', () => {
  it('no serving node yet: the service node\'s verdict, as before cross-node routing', () => {
    const got = routeServing(route, home, [], liveOf({ home: { sessionId: 's-home', routing: routing([probe('serving')]) } }), NOW);
    expect(got.servedBy).toEqual([]);
    expect(got.health.state).toBe('serving');
  });

  it('serving while any node serves it, naming that node and how many serve; each node keeps its own verdict', () => {
    const got = routeServing(route, home, [row('a'), row('b'), row('c', 'ingress')], liveOf({ b: { sessionId: 's-b', routing: routing([probe('serving')]) }, c: { sessionId: 's-c', routing: routing([probe('failing')]) } }), NOW);
    expect(got.servedBy.map((s) => [s.node.name, s.role, s.health.state])).toEqual([
      ['a', 'replica', 'unknown'],
      ['b', 'replica', 'serving'],
      ['c', 'ingress', 'failing'],
    ]);
    expect(got.health.state).toBe('serving');
    expect(got.health.reason).toMatch(/\(node b; 1 of 3 nodes serving\)$/);
    expect(got.health.evidence).toMatchObject({ sessionId: 's-b' });
  });

  it('failing when none serves and one failed; unknown, with every node\'s reason, when none has a verdict', () => {
    const failing = routeServing(route, home, [row('a'), row('b')], liveOf({ b: { sessionId: 's-b', routing: routing([probe('failing')]) } }), NOW);
    expect(failing.health.state).toBe('failing');
    const unknown = routeServing(route, home, [row('a'), row('b')], liveOf({}), NOW);
    expect(unknown.health).toEqual({ state: 'unknown', reason: 'no serving node proves it: a: node a has no live session; b: node b has no live session', evidence: null });
  });

  it("one serving node: its verdict as it is, a route not probed on purpose keeping its evidence", () => {
    const notProbed = probe('failing', { madeBy: 'none', status: null, error: 'dns elsewhere', notProbed: { reason: 'dns-elsewhere', resolved: ['192.0.2.1'], hostAddresses: ['127.0.0.1'] } });
    const got = routeServing(route, home, [row('home', 'home')], liveOf({ home: { sessionId: 's-home', routing: routing([notProbed]) } }), NOW);
    expect(got.health.state).toBe('unknown');
    expect(got.health.evidence).toMatchObject({ notProbed: { reason: 'dns-elsewhere' }, sessionId: 's-home' });
  });
});
