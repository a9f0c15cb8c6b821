import { describe, expect, it } from 'vitest';
import { schedule, wantedReplicas } from '../src/scheduling/schedule.js';
import { compareText } from '../src/scheduling/order.js';
import type { Allocation, NodeView, ServiceSpec } from '../src/scheduling/types.js';
import { applier, countBy, node, prng, service } from './scheduling/fixtures.js';

// Properties of schedule() over seeded random fleets: each seed is a case
// that can be replayed. The reference picker below is the rule written the
// slow, obvious way; the scheduler's heap must choose exactly as it does.

const SEEDS = Array.from({ length: 60 }, (_, i) => i + 1);
const ZONES = ['x', 'y', 'z'];

function fleet(seed: number): { nodes: NodeView[]; services: ServiceSpec[]; random: () => number } {
  const random = prng(seed);
  const nodeCount = 1 + Math.floor(random() * 25);
  const nodes = Array.from({ length: nodeCount }, (_, i) =>
    node(`n${String(Math.floor(random() * 1000)).padStart(3, '0')}-${i}`, {
      labels: { zone: ZONES[Math.floor(random() * ZONES.length)]! },
      cordoned: random() < 0.1,
    }),
  );
  const services = Array.from({ length: 1 + Math.floor(random() * 40) }, (_, i) =>
    service(`s${String(i).padStart(2, '0')}`, Math.floor(random() * 8), {
      placement: random() < 0.2 ? { labels: { zone: ZONES[Math.floor(random() * ZONES.length)]! } } : {},
      stateful: random() < 0.1,
    }),
  );
  return { nodes, services, random };
}

function eligibleFor(s: ServiceSpec, nodes: readonly NodeView[]): NodeView[] {
  return nodes.filter((n) => n.state === 'live' && !n.cordoned && !n.decommissioned && (s.placement.labels?.zone ?? n.labels.zone) === n.labels.zone);
}

function settle(services: ServiceSpec[], nodes: NodeView[]): Allocation[] {
  return applier()([], schedule(services, nodes, []));
}

describe('schedule: properties over random fleets', () => {
  it.each(SEEDS)('seed %i: every allocation exists once and each service runs what it wants', (seed) => {
    const { nodes, services } = fleet(seed);
    const allocations = settle(services, nodes);
    expect(new Set(allocations.map((a) => a.id)).size).toBe(allocations.length);
    const perService = countBy(allocations, (a) => a.serviceId);
    for (const s of services) {
      const eligible = eligibleFor(s, nodes);
      expect(perService.get(s.id) ?? 0).toBe(eligible.length === 0 ? 0 : wantedReplicas(s));
      const mine = allocations.filter((a) => a.serviceId === s.id);
      const eligibleIds = new Set(eligible.map((n) => n.id));
      expect(mine.every((a) => eligibleIds.has(a.nodeId))).toBe(true);
      const perNode = [...countBy(mine, (a) => a.nodeId).values()];
      // At most one per node while nodes suffice; evenly spread (max − min ≤ 1 over eligible nodes) beyond.
      if (mine.length <= eligible.length) expect(Math.max(0, ...perNode)).toBeLessThanOrEqual(1);
      else expect(Math.max(...perNode) - Math.min(...eligible.map((n) => mine.filter((a) => a.nodeId === n.id).length))).toBeLessThanOrEqual(1);
    }
  });

  it.each(SEEDS)('seed %i: runs again on its own result without a change', (seed) => {
    const { nodes, services } = fleet(seed);
    const result = schedule(services, nodes, settle(services, nodes));
    expect(result.place).toEqual([]);
    expect(result.stop).toEqual([]);
  });

  it.each(SEEDS)('seed %i: adding nodes moves nothing', (seed) => {
    const { nodes, services, random } = fleet(seed);
    const allocations = settle(services, nodes);
    const added = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, i) => node(`added-${i}`, { labels: { zone: 'x' } }));
    const result = schedule(services, [...nodes, ...added], allocations);
    expect(result.stop).toEqual([]);
    // Only replicas that were pending for want of a node may land on the new ones.
    const pendingBefore = schedule(services, nodes, allocations).pending.reduce((sum, p) => sum + p.count, 0);
    expect(result.place.length).toBeLessThanOrEqual(pendingBefore);
  });

  it.each(SEEDS)('seed %i: adding a replica only places it; removing one only stops one', (seed) => {
    const { nodes, services, random } = fleet(seed);
    const allocations = settle(services, nodes);
    const target = services[Math.floor(random() * services.length)]!;
    const others = services.filter((s) => s !== target);
    const up = schedule([...others, { ...target, replicas: target.replicas + 1 }], nodes, allocations);
    expect(up.stop).toEqual([]);
    expect(up.place.every((p) => p.serviceId === target.id && p.replaces === undefined)).toBe(true);
    const down = schedule([...others, { ...target, replicas: Math.max(0, target.replicas - 1) }], nodes, allocations);
    expect(down.place).toEqual([]);
    expect(down.stop.length).toBeLessThanOrEqual(1);
    expect(down.stop.every((s) => s.serviceId === target.id)).toBe(true);
  });

  it.each(SEEDS)('seed %i: losing a node moves only its allocations', (seed) => {
    const { nodes, services, random } = fleet(seed);
    const allocations = settle(services, nodes);
    const victim = nodes[Math.floor(random() * nodes.length)]!;
    const after = nodes.map((n) => (n === victim ? { ...n, state: 'lost' as const } : n));
    const result = schedule(services, after, allocations);
    const onVictim = new Set(allocations.filter((a) => a.nodeId === victim.id).map((a) => a.id));
    expect(result.stop.every((s) => onVictim.has(s.allocationId))).toBe(true);
    expect(result.place.every((p) => p.nodeId !== victim.id && (p.replaces === undefined || onVictim.has(p.replaces)))).toBe(true);
    const next = applier(50_000)(allocations, result);
    expect(new Set(next.map((a) => a.id)).size).toBe(next.length);
    expect(next.filter((a) => a.nodeId === victim.id).every((a) => services.find((s) => s.id === a.serviceId)!.stateful)).toBe(true);
  });

  it.each(SEEDS)('seed %i: the heap chooses exactly as the slow rule', (seed) => {
    const { nodes, random } = fleet(seed);
    const services = Array.from({ length: 30 }, (_, i) => service(`u${String(i).padStart(2, '0')}`, Math.floor(random() * 6)));
    const result = schedule(services, nodes, []);
    const load = new Map<string, number>();
    const expected: string[] = [];
    for (const s of services) {
      const own = new Map<string, number>();
      const eligible = eligibleFor(s, nodes).sort((a, b) => compareText(a.name, b.name));
      for (let r = 0; r < s.replicas && eligible.length > 0; r++) {
        const key = (n: NodeView) => [own.get(n.id) ?? 0, load.get(n.id) ?? 0] as const;
        const best = eligible.reduce((b, n) => {
          const [ob, lb] = key(b);
          const [on, ln] = key(n);
          return on < ob || (on === ob && ln < lb) ? n : b;
        });
        own.set(best.id, (own.get(best.id) ?? 0) + 1);
        load.set(best.id, (load.get(best.id) ?? 0) + 1);
        expected.push(`${s.id}@${best.id}`);
      }
    }
    expect(result.place.map((p) => `${p.serviceId}@${p.nodeId}`)).toEqual(expected);
  });
});
