import { describe, expect, it } from 'vitest';
import { AppError } from '../src/errors.js';
import { desiredWorkloads } from '../src/scheduling/desired-workloads.js';
import { planEvacuation } from '../src/scheduling/evacuation-plan.js';
import { planRollout, rolloutLimits } from '../src/scheduling/rollout-plan.js';
import { schedule } from '../src/scheduling/schedule.js';
import type { Allocation } from '../src/scheduling/types.js';
import { alloc, applier, countBy, node, nodes, service } from './scheduling/fixtures.js';

// The plans beside schedule(): a release rolled across nodes, a node
// evacuated one allocation at a time, and each node's desired workload set.

describe('planRollout', () => {
  const all = [node('a'), node('b'), node('c')];
  const three = [alloc('s1', 's', 'c', 1), alloc('s2', 's', 'a', 2), alloc('s3', 's', 'b', 3)];
  const next = service('s', 3, { releaseId: 's-r2' });

  it('defaults to one replica at a time, the new one healthy before the old drains, node by node', () => {
    const plan = planRollout(next, all, three);
    expect(plan).toMatchObject({ maxSurge: 1, maxUnavailable: 0 });
    expect(plan.steps).toEqual([
      [{ allocationId: 's2', nodeId: 'n-a', fromRelease: 's-r1', toRelease: 's-r2', order: 'start-first' }],
      [{ allocationId: 's3', nodeId: 'n-b', fromRelease: 's-r1', toRelease: 's-r2', order: 'start-first' }],
      [{ allocationId: 's1', nodeId: 'n-c', fromRelease: 's-r1', toRelease: 's-r2', order: 'start-first' }],
    ]);
  });

  it('batches maxSurge + maxUnavailable replacements, maxUnavailable of them stopping first', () => {
    const plan = planRollout(next, all, three, { maxSurge: 1, maxUnavailable: 1 });
    expect(plan.steps.map((step) => step.map((r) => `${r.allocationId}:${r.order}`))).toEqual([['s2:stop-first', 's3:start-first'], ['s1:stop-first']]);
    // Never below wanted − maxUnavailable, never above wanted + maxSurge.
    for (const step of plan.steps) {
      expect(step.filter((r) => r.order === 'stop-first').length).toBeLessThanOrEqual(1);
      expect(step.filter((r) => r.order === 'start-first').length).toBeLessThanOrEqual(1);
    }
  });

  it('maxSurge 2 (a service\'s rollout): two replacements at a time, each starting its new replica first', () => {
    const four = [...three, alloc('s4', 's', 'd', 4)];
    const plan = planRollout(service('s', 4, { releaseId: 's-r2' }), [...all, node('d')], four, { maxSurge: 2 });
    expect(plan).toMatchObject({ maxSurge: 2, maxUnavailable: 0 });
    expect(plan.steps.map((step) => step.map((r) => `${r.nodeId}:${r.order}`))).toEqual([
      ['n-a:start-first', 'n-b:start-first'],
      ['n-c:start-first', 'n-d:start-first'],
    ]);
  });

  it('maxUnavailable 1 with maxSurge 0: one at a time, the old replica stopped before its replacement starts', () => {
    const plan = planRollout(next, all, three, { maxSurge: 0, maxUnavailable: 1 });
    expect(plan).toMatchObject({ maxSurge: 0, maxUnavailable: 1 });
    expect(plan.steps.map((step) => step.map((r) => `${r.allocationId}:${r.order}`))).toEqual([['s2:stop-first'], ['s3:stop-first'], ['s1:stop-first']]);
    // maxUnavailable 2: two stopped first at once, never more below the wanted count.
    expect(planRollout(next, all, three, { maxSurge: 0, maxUnavailable: 2 }).steps.map((step) => step.length)).toEqual([2, 1]);
  });

  it('replaces only replicas of an older release', () => {
    const mixed: Allocation[] = [...three.slice(0, 2), { ...three[2]!, releaseId: 's-r2' }];
    expect(planRollout(next, all, mixed).steps.flat().map((r) => r.allocationId)).toEqual(['s2', 's1']);
    expect(planRollout(service('s', 3), all, three).steps).toEqual([]);
  });

  it('stops first for a writable volume: two containers never share its data', () => {
    const db = service('db', 1, { stateful: true, releaseId: 'db-r2' });
    const plan = planRollout(db, all, [alloc('d1', 'db', 'a', 1)]);
    expect(plan).toMatchObject({ maxSurge: 0, maxUnavailable: 1, steps: [[{ allocationId: 'd1', order: 'stop-first' }]] });
  });

  it.each([
    [{ maxSurge: 0, maxUnavailable: 0 }, false],
    [{ maxSurge: -1 }, false],
    [{ maxSurge: 1.5 }, false],
    [{ maxUnavailable: 101 }, false],
    [{ maxSurge: 1 }, true],
    [{ maxUnavailable: 0 }, true],
  ])('refuses %o with VALIDATION_FAILED naming the field', (options, stateful) => {
    const s = service('s', 3, { stateful });
    expect(() => rolloutLimits(s, options)).toThrow(AppError);
    try {
      rolloutLimits(s, options);
    } catch (error) {
      expect((error as AppError).code).toBe('VALIDATION_FAILED');
      expect((error as AppError).details?.field).toMatch(/^rollout\.(maxSurge|maxUnavailable)$/);
    }
  });
});

describe('planEvacuation', () => {
  const all = [node('a'), node('b'), node('c'), node('d')];

  it('moves every allocation off the node, one at a time, to nodes without the service', () => {
    const existing = [alloc('s1', 's', 'a', 1), alloc('s2', 's', 'b', 2), alloc('t1', 't', 'a', 3), alloc('x1', 'x', 'c', 4)];
    const plan = planEvacuation('n-a', [service('s', 2), service('t', 1), service('x', 1)], all, existing);
    expect(plan.moves).toEqual([
      // s already runs on b; c carries x: d is the emptiest node without s.
      { allocationId: 's1', serviceId: 's', from: 'n-a', to: 'n-d', releaseId: 's-r1' },
      { allocationId: 't1', serviceId: 't', from: 'n-a', to: 'n-b', releaseId: 't-r1' },
    ]);
    expect(plan.refused).toEqual([]);
    expect(plan.pending).toEqual([]);
  });

  it('keeps spreading across moves: two replicas leaving one node go to two nodes', () => {
    const existing = [alloc('s1', 's', 'a', 1), alloc('s2', 's', 'a', 2)];
    const plan = planEvacuation('n-a', [service('s', 2)], all, existing);
    expect(plan.moves.map((m) => m.to)).toEqual(['n-b', 'n-c']);
  });

  it('refuses to move a stateful service and says why; reports what has nowhere to go', () => {
    const existing = [alloc('d1', 'db', 'a', 1), alloc('g1', 'gpu', 'a', 2)];
    const plan = planEvacuation(
      'n-a',
      [service('db', 1, { stateful: true }), service('gpu', 1, { placement: { labels: { gpu: 'yes' } } })],
      [node('a', { labels: { gpu: 'yes' } }), node('b')],
      existing,
    );
    expect(plan.moves).toEqual([]);
    expect(plan.refused).toEqual([expect.objectContaining({ allocationId: 'd1', reason: 'STATEFUL_SERVICE_PINNED', message: expect.stringContaining('node a') })]);
    expect(plan.pending).toEqual([{ kind: 'pending', serviceId: 'gpu', count: 1, reason: 'NO_NODE_MATCHES_LABELS' }]);
  });

  it('ends with nothing on the node and schedule() content once the node is cordoned', () => {
    const apply = applier();
    const services = [service('s', 3), service('t', 2), service('u', 4)];
    const allocations = apply([], schedule(services, all, []));
    const plan = planEvacuation('n-b', services, all, allocations);
    const moved = new Map(plan.moves.map((m) => [m.allocationId, m.to]));
    const after = allocations.map((a) => (moved.has(a.id) ? { ...a, nodeId: moved.get(a.id)! } : a));
    expect(after.filter((a) => a.nodeId === 'n-b')).toEqual([]);
    const cordoned = all.map((n) => (n.id === 'n-b' ? { ...n, cordoned: true } : n));
    expect(schedule(services, cordoned, after)).toEqual({ place: [], stop: [], pending: [], refused: [] });
    for (const s of services.filter((x) => x.replicas <= 3)) {
      expect(Math.max(...countBy(after.filter((a) => a.serviceId === s.id), (a) => a.nodeId).values())).toBe(1);
    }
  });
});

describe('desiredWorkloads', () => {
  it('derives each node set from its running allocations, an empty set for a node without any', () => {
    const allocations = [
      alloc('t1', 't', 'a', 5),
      alloc('s2', 's', 'a', 2, { releaseId: 's-r2' }),
      alloc('s1', 's', 'b', 1),
      alloc('s0', 's', 'a', 1, { desired: 'stop' }),
    ];
    const sets = desiredWorkloads(['n-a', 'n-b', 'n-c'], allocations);
    expect(Object.fromEntries(sets)).toEqual({
      'n-a': [
        { allocationId: 's2', serviceId: 's', releaseId: 's-r2' },
        { allocationId: 't1', serviceId: 't', releaseId: 't-r1' },
      ],
      'n-b': [{ allocationId: 's1', serviceId: 's', releaseId: 's-r1' }],
      'n-c': [],
    });
  });

  it('covers every running allocation exactly once across nodes', () => {
    const allocations = applier()([], schedule([service('s', 5), service('t', 2)], nodes(3), []));
    const all = [...desiredWorkloads(['n-node-0000'], allocations).values()].flat();
    expect(all.map((w) => w.allocationId).sort()).toEqual(allocations.map((a) => a.id).sort());
  });
});
