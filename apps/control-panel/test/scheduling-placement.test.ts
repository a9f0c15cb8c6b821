import { describe, expect, it } from 'vitest';
import { schedule } from '../src/scheduling/schedule.js';
import { alloc, applier, countBy, node, nodes, service } from './scheduling/fixtures.js';

// schedule(): where replicas go, what moves and what never does. Pure: no I/O.

describe('schedule: spreading', () => {
  it('places one replica on each node while there are enough nodes', () => {
    const result = schedule([service('s', 3)], nodes(3), []);
    expect(result.place.map((p) => p.nodeId).sort()).toEqual(['n-node-0000', 'n-node-0001', 'n-node-0002']);
    expect(result.place.every((p) => p.cause === 'scale-up' && p.releaseId === 's-r1' && p.replaces === undefined)).toBe(true);
    expect(result.stop).toEqual([]);
    expect(result.pending).toEqual([]);
  });

  it('breaks ties by node name', () => {
    const result = schedule([service('s', 1)], [node('c'), node('a'), node('b')], []);
    expect(result.place.map((p) => p.nodeId)).toEqual(['n-a']);
  });

  it('prefers the node with the fewest allocations overall', () => {
    const existing = [alloc('x1', 'other', 'a', 1), alloc('x2', 'other', 'a', 2), alloc('x3', 'other', 'b', 3)];
    const result = schedule([service('other', 3), service('s', 2)], [node('a'), node('b'), node('c')], existing);
    // c is empty, then b (one allocation) beats a (two).
    expect(result.place).toEqual([
      { kind: 'place', serviceId: 's', nodeId: 'n-c', releaseId: 's-r1', cause: 'scale-up' },
      { kind: 'place', serviceId: 's', nodeId: 'n-b', releaseId: 's-r1', cause: 'scale-up' },
    ]);
  });

  it('spreads replicas evenly once they outnumber the nodes', () => {
    const result = schedule([service('s', 7)], nodes(3), []);
    expect([...countBy(result.place, (p) => p.nodeId).values()].sort()).toEqual([2, 2, 3]);
    expect(countBy(result.place, (p) => p.nodeId).get('n-node-0000')).toBe(3);
  });

  it('keeps one replica per node even when another service loads the empty nodes less', () => {
    const existing = [alloc('x1', 'busy', 'a', 1), alloc('x2', 'busy', 'a', 2), alloc('s1', 's', 'b', 3)];
    const result = schedule([service('busy', 2, { placement: { nodes: ['a'] } }), service('s', 2)], [node('a'), node('b')], existing);
    // b has the lower load but already runs s: the second replica goes to a.
    expect(result.place).toEqual([{ kind: 'place', serviceId: 's', nodeId: 'n-a', releaseId: 's-r1', cause: 'scale-up' }]);
  });

  it('bounds replicas to 100', () => {
    const result = schedule([service('s', 250)], nodes(2), []);
    expect(result.place).toHaveLength(100);
  });
});

describe('schedule: stability', () => {
  const apply = applier();
  const start = () => {
    const all = nodes(3);
    const services = [service('s', 3), service('t', 2)];
    return { all, services, allocations: apply([], schedule(services, all, [])) };
  };

  it('changes nothing when run again on its own result', () => {
    const { all, services, allocations } = start();
    expect(schedule(services, all, allocations)).toEqual({ place: [], stop: [], pending: [], refused: [] });
  });

  it('moves nothing when a node is added', () => {
    const { all, services, allocations } = start();
    expect(schedule(services, [...all, node('new')], allocations)).toEqual({ place: [], stop: [], pending: [], refused: [] });
  });

  it('adds a replica on a node without one and moves nothing else', () => {
    const { all, allocations } = start();
    const grown = [service('s', 3), service('t', 3)];
    const result = schedule(grown, all, allocations);
    expect(result.stop).toEqual([]);
    expect(result.place).toHaveLength(1);
    const tNodes = allocations.filter((a) => a.serviceId === 't').map((a) => a.nodeId);
    expect(tNodes).not.toContain(result.place[0]!.nodeId);
  });
});

describe('schedule: scale-down', () => {
  it('removes exactly one replica, marked to stop after its drain', () => {
    const existing = [alloc('s1', 's', 'a', 1), alloc('s2', 's', 'b', 2), alloc('s3', 's', 'c', 3)];
    const result = schedule([service('s', 2)], [node('a'), node('b'), node('c')], existing);
    expect(result.place).toEqual([]);
    expect(result.stop).toHaveLength(1);
    expect(result.stop[0]).toMatchObject({ drain: true, cause: 'scale-down' });
  });

  it('removes the newest replica on the most loaded node', () => {
    const existing = [
      alloc('s1', 's', 'a', 1),
      alloc('s2', 's', 'b', 2),
      alloc('s3', 's', 'c', 3),
      alloc('s4', 's', 'b', 4),
      alloc('s5', 's', 'b', 5),
      alloc('x1', 'x', 'c', 6),
    ];
    const all = [node('a'), node('b'), node('c')];
    const result = schedule([service('s', 4), service('x', 1)], all, existing);
    expect(result.stop.map((s) => s.allocationId)).toEqual(['s5']);
    // With one replica per node, the node loaded by another service loses its replica.
    const again = schedule([service('s', 2), service('x', 1)], all, existing.filter((a) => !['s4', 's5'].includes(a.id)));
    expect(again.stop.map((s) => s.allocationId)).toEqual(['s3']);
  });

  it('stops every replica at 0 and a removed service entirely', () => {
    const existing = [alloc('s1', 's', 'a', 1), alloc('g1', 'gone', 'a', 2), alloc('u1', 's', 'b', 3)];
    const result = schedule([service('s', 0)], [node('a'), node('b', { state: 'unreachable' })], existing);
    expect(result.stop).toEqual([
      { kind: 'stop', allocationId: 's1', serviceId: 's', nodeId: 'n-a', drain: true, cause: 'service-stopped' },
      // An unreachable node cannot drain now; the stop waits in its desired set.
      { kind: 'stop', allocationId: 'u1', serviceId: 's', nodeId: 'n-b', drain: false, cause: 'service-stopped' },
      { kind: 'stop', allocationId: 'g1', serviceId: 'gone', nodeId: 'n-a', drain: true, cause: 'service-stopped' },
    ]);
  });

  it('sheds replicas of a lost node before touching kept ones', () => {
    const existing = [alloc('s1', 's', 'a', 1), alloc('s2', 's', 'b', 2), alloc('s3', 's', 'c', 3)];
    const result = schedule([service('s', 2)], [node('a'), node('b', { state: 'lost' }), node('c')], existing);
    expect(result.stop).toEqual([{ kind: 'stop', allocationId: 's2', serviceId: 's', nodeId: 'n-b', drain: false, cause: 'scale-down' }]);
    expect(result.place).toEqual([]);
  });
});

describe('schedule: node states', () => {
  it('keeps allocations on a cordoned node and places nothing new there', () => {
    const existing = [alloc('s1', 's', 'a', 1)];
    const result = schedule([service('s', 1), service('t', 1)], [node('a', { cordoned: true }), node('b')], existing);
    expect(result.stop).toEqual([]);
    expect(result.place).toEqual([{ kind: 'place', serviceId: 't', nodeId: 'n-b', releaseId: 't-r1', cause: 'scale-up' }]);
  });

  it('keeps allocations on an unreachable node and places nothing new there', () => {
    const existing = [alloc('s1', 's', 'a', 1)];
    const result = schedule([service('s', 2)], [node('a', { state: 'unreachable' }), node('b', { state: 'unreachable' })], existing);
    expect(result.stop).toEqual([]);
    expect(result.pending).toEqual([{ kind: 'pending', serviceId: 's', count: 1, reason: 'NO_NODE_AVAILABLE' }]);
  });

  it.each([
    ['lost', { state: 'lost' as const }],
    ['decommissioned', { decommissioned: true }],
  ])('replaces the replicas of a %s node on another node', (_, overrides) => {
    const existing = [alloc('s1', 's', 'a', 1), alloc('s2', 's', 'b', 2)];
    const result = schedule([service('s', 2)], [node('a', overrides), node('b'), node('c')], existing);
    expect(result.stop).toEqual([{ kind: 'stop', allocationId: 's1', serviceId: 's', nodeId: 'n-a', drain: false, cause: 'node-lost' }]);
    expect(result.place).toEqual([{ kind: 'place', serviceId: 's', nodeId: 'n-c', releaseId: 's-r1', cause: 'node-lost', replaces: 's1' }]);
  });

  it('treats an allocation on a node it does not know as lost', () => {
    const result = schedule([service('s', 1)], [node('b')], [alloc('s1', 's', 'vanished', 1)]);
    expect(result.stop.map((s) => s.cause)).toEqual(['node-lost']);
    expect(result.place.map((p) => p.nodeId)).toEqual(['n-b']);
  });
});

describe('schedule: placement constraints', () => {
  const labelled = [node('a', { labels: { disk: 'ssd' } }), node('b', { labels: { disk: 'hdd' } }), node('c', { labels: { disk: 'ssd', zone: 'x' } })];

  it('places only on nodes carrying every required label', () => {
    const result = schedule([service('s', 3, { placement: { labels: { disk: 'ssd' } } })], labelled, []);
    expect([...countBy(result.place, (p) => p.nodeId)].sort()).toEqual([['n-a', 2], ['n-c', 1]]);
    const both = schedule([service('s', 1, { placement: { labels: { disk: 'ssd', zone: 'x' } } })], labelled, []);
    expect(both.place.map((p) => p.nodeId)).toEqual(['n-c']);
  });

  it('places only on the named nodes', () => {
    const result = schedule([service('s', 2, { placement: { nodes: ['b', 'c'] } })], labelled, []);
    expect(result.place.map((p) => p.nodeId).sort()).toEqual(['n-b', 'n-c']);
  });

  it('leaves replicas pending with the reason when no node fits', () => {
    const result = schedule(
      [
        service('labels', 2, { placement: { labels: { gpu: 'yes' } } }),
        service('named', 1, { placement: { nodes: ['elsewhere'] } }),
        service('cordoned', 1, { placement: { nodes: ['a'] } }),
      ],
      [node('a', { cordoned: true }), node('b')],
      [],
    );
    expect(result.place).toEqual([]);
    expect(result.pending).toEqual([
      { kind: 'pending', serviceId: 'cordoned', count: 1, reason: 'NO_NODE_AVAILABLE' },
      { kind: 'pending', serviceId: 'labels', count: 2, reason: 'NO_NODE_MATCHES_LABELS' },
      { kind: 'pending', serviceId: 'named', count: 1, reason: 'NO_NODE_AVAILABLE' },
    ]);
  });

  it('reports NO_NODE_AVAILABLE when no node is live, and places once one is', () => {
    expect(schedule([service('s', 2)], [], []).pending).toEqual([{ kind: 'pending', serviceId: 's', count: 2, reason: 'NO_NODE_AVAILABLE' }]);
    expect(schedule([service('s', 2)], [node('a')], []).place.map((p) => p.nodeId)).toEqual(['n-a', 'n-a']);
  });

  it('moves a replica whose node no longer fits: the new one first, the old one kept until then', () => {
    const existing = [alloc('s1', 's', 'b', 1), alloc('s2', 's', 'a', 2)];
    const result = schedule([service('s', 2, { placement: { labels: { disk: 'ssd' } } })], labelled, existing);
    expect(result.stop).toEqual([]);
    expect(result.place).toEqual([{ kind: 'place', serviceId: 's', nodeId: 'n-c', releaseId: 's-r1', cause: 'placement-changed', replaces: 's1' }]);
  });

  it('keeps a replica whose node no longer fits when nothing else does', () => {
    const result = schedule([service('s', 1, { placement: { labels: { gpu: 'yes' } } })], labelled, [alloc('s1', 's', 'a', 1)]);
    expect(result.stop).toEqual([]);
    expect(result.place).toEqual([]);
    expect(result.pending).toEqual([{ kind: 'pending', serviceId: 's', count: 1, reason: 'NO_NODE_MATCHES_LABELS' }]);
  });
});

describe('schedule: a writable volume pins the service', () => {
  it('runs one replica whatever replicas says', () => {
    const result = schedule([service('db', 3, { stateful: true })], nodes(3), []);
    expect(result.place).toHaveLength(1);
  });

  it('refuses to move off a lost node and places no second copy', () => {
    const existing = [alloc('d1', 'db', 'a', 1)];
    const result = schedule([service('db', 1, { stateful: true })], [node('a', { state: 'lost' }), node('b')], existing);
    expect(result.place).toEqual([]);
    expect(result.stop).toEqual([]);
    expect(result.refused).toEqual([expect.objectContaining({ allocationId: 'd1', reason: 'STATEFUL_SERVICE_PINNED', message: expect.stringContaining('node a') })]);
  });

  it('moves off a node an operator gave up (decommissioned or declared lost): stopped there, placed on its new home at once', () => {
    const existing = [alloc('d1', 'db', 'a', 1)];
    const home = { nodes: ['b'] };
    for (const a of [node('a', { decommissioned: true }), node('a', { state: 'lost', decommissioned: true }), node('a', { state: 'unreachable', decommissioned: true })]) {
      const result = schedule([service('db', 1, { stateful: true, placement: home })], [a, node('b'), node('c')], existing);
      expect(result.refused).toEqual([]);
      expect(result.stop).toEqual([expect.objectContaining({ allocationId: 'd1', drain: false, cause: 'node-lost' })]);
      expect(result.place).toEqual([expect.objectContaining({ serviceId: 'db', nodeId: 'n-b', cause: 'node-lost', replaces: 'd1' })]);
    }
  });

  it('refuses to move when its placement no longer fits, and still stops at 0', () => {
    const existing = [alloc('d1', 'db', 'a', 1)];
    const all = [node('a'), node('b')];
    expect(schedule([service('db', 1, { stateful: true, placement: { nodes: ['b'] } })], all, existing).refused).toHaveLength(1);
    expect(schedule([service('db', 0, { stateful: true })], all, existing).stop.map((s) => s.allocationId)).toEqual(['d1']);
  });
});
