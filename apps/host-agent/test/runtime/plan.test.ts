import type { Workload } from '@tether/protocol';
import { describe, expect, it } from 'vitest';
import { plan, restartDelay, type Action, type ActualContainer, type PlanContext } from '../../src/runtime/plan.js';

// plan() is pure: every case of the reconcile loop as a table, no Docker.

const NOW = 1_000_000;

const workload = (serviceId: string, deploymentId: string, replicas = 1): Workload => ({
  serviceId,
  serviceName: serviceId,
  deploymentId,
  image: 'tether-test/web:1',
  env: {},
  port: 8080,
  replicas,
});

let seq = 0;
const container = (serviceId: string, deploymentId: string, replica: number | null, over: Partial<ActualContainer> = {}): ActualContainer => ({
  id: over.id ?? `c${++seq}`,
  name: `tether-n-${serviceId}-${deploymentId}-${replica}`,
  serviceId,
  deploymentId,
  replica,
  state: 'running',
  exitCode: null,
  health: 'none',
  createdAt: NOW - 60_000,
  startedAt: NOW - 60_000,
  finishedAt: null,
  ...over,
});

const crashed = (serviceId: string, deploymentId: string, replica: number, finishedAgoMs: number, over: Partial<ActualContainer> = {}) =>
  container(serviceId, deploymentId, replica, { state: 'exited', exitCode: 3, finishedAt: NOW - finishedAgoMs, ...over });

const ctx = (over: Partial<PlanContext> = {}): PlanContext => ({
  now: NOW,
  restartBudget: 3,
  restartBackoff: { initialMs: 1_000, maxMs: 8_000 },
  restarts: new Map(),
  reported: new Set(),
  held: new Set(),
  ...over,
});

const desired = (...ws: Workload[]) => new Map(ws.map((w) => [w.serviceId, w]));

/** Actions reduced to what a table can compare: kind, service, and the containers or slots they touch. */
function summary(actions: Action[]): string[] {
  return actions.map((a) => {
    switch (a.kind) {
      case 'create':
        return `create ${a.serviceId} ${a.workload.deploymentId} [${a.replicas.join(',')}]`;
      case 'replace':
        return `replace ${a.serviceId} ${a.workload.deploymentId} new [${a.replicas.join(',')}] keep [${a.keep.map((c) => c.id).join(',')}] retire [${a.retire.map((c) => c.id).join(',')}]${a.overlap ? '' : ' stop-first'}`;
      case 'restart':
        return `restart ${a.container.id} attempt ${a.attempt}`;
      case 'start':
        return `start ${a.container.id}`;
      case 'wait':
        return `wait ${a.container.id} +${a.until - NOW}`;
      case 'remove':
        return `remove ${a.container.id} ${a.reason}`;
      case 'fail-deployment':
        return `report-failed ${a.container.id} ${a.code}: ${a.reason}`;
    }
  });
}

describe('plan(): desired vs actual', () => {
  const web1 = workload('web', 'd1');
  const web2 = workload('web', 'd2');

  const cases: { name: string; desired: Map<string, Workload> | null; actual: ActualContainer[]; ctx?: Partial<PlanContext>; expected: string[] }[] = [
    { name: 'nothing desired, nothing there: no action', desired: desired(), actual: [], expected: [] },
    { name: 'missing service: create every replica', desired: desired(workload('web', 'd1', 2)), actual: [], expected: ['create web d1 [0,1]'] },
    { name: 'zero replicas and nothing there: no action', desired: desired(workload('web', 'd1', 0)), actual: [], expected: [] },
    {
      name: 'adoption: the correct container already runs: no action',
      desired: desired(web1),
      actual: [container('web', 'd1', 0, { id: 'a' })],
      expected: [],
    },
    {
      name: 'older deployment runs: replace it (new first, old retired after)',
      desired: desired(web2),
      actual: [container('web', 'd1', 0, { id: 'old' })],
      expected: ['replace web d2 new [0] keep [] retire [old]'],
    },
    {
      name: 'interrupted rollout (old and some new there): keep the new, create the rest, retire the old',
      desired: desired(workload('web', 'd2', 2)),
      actual: [container('web', 'd1', 0, { id: 'old' }), container('web', 'd2', 1, { id: 'new1' })],
      expected: ['replace web d2 new [0] keep [new1] retire [old]'],
    },
    {
      name: 'crashed within budget, backoff elapsed: restart',
      desired: desired(web1),
      actual: [crashed('web', 'd1', 0, 5_000, { id: 'x' })],
      ctx: { restarts: new Map([['x', 1]]) },
      expected: ['restart x attempt 2'],
    },
    {
      name: 'crashed within budget, backoff still running: wait until finishedAt + delay',
      desired: desired(web1),
      actual: [crashed('web', 'd1', 0, 500, { id: 'x' })],
      expected: ['wait x +500'],
    },
    {
      name: 'crashed past budget: report once, leave it exited',
      desired: desired(web1),
      actual: [crashed('web', 'd1', 0, 60_000, { id: 'x' })],
      ctx: { restarts: new Map([['x', 3]]) },
      expected: ['report-failed x CONTAINER_EXITED: exited with code 3; restart budget of 3 used up'],
    },
    {
      name: 'killed for memory past budget: reported OOM_KILLED',
      desired: desired(web1),
      actual: [crashed('web', 'd1', 0, 60_000, { id: 'x', exitCode: 137, oomKilled: true })],
      ctx: { restarts: new Map([['x', 3]]) },
      expected: ['report-failed x OOM_KILLED: exited with code 137 (killed: out of memory); restart budget of 3 used up'],
    },
    {
      name: 'writable volume: the older deployment is stopped before the new one starts (no overlap)',
      desired: desired({ ...web2, volumes: [{ name: 'data', mountPath: '/data', readOnly: false }] }),
      actual: [container('web', 'd1', 0, { id: 'old' })],
      expected: ['replace web d2 new [0] keep [] retire [old] stop-first'],
    },
    {
      name: 'fenced release (workload.fence): the older deployment is stopped before the new one starts (no overlap)',
      desired: desired({ ...web2, fence: true }),
      actual: [container('web', 'd1', 0, { id: 'old' })],
      expected: ['replace web d2 new [0] keep [] retire [old] stop-first'],
    },
    {
      name: 'read-only volumes only: the usual overlapping rollout',
      desired: desired({ ...web2, volumes: [{ name: 'assets', mountPath: '/assets', readOnly: true }] }),
      actual: [container('web', 'd1', 0, { id: 'old' })],
      expected: ['replace web d2 new [0] keep [] retire [old]'],
    },
    {
      name: 'crashed past budget and already reported: nothing more',
      desired: desired(web1),
      actual: [crashed('web', 'd1', 0, 60_000, { id: 'x' })],
      ctx: { restarts: new Map([['x', 3]]), reported: new Set(['x']) },
      expected: [],
    },
    {
      name: 'created but never started (agent died in between): start it',
      desired: desired(web1),
      actual: [container('web', 'd1', 0, { id: 'x', state: 'created', startedAt: null })],
      expected: ['start x'],
    },
    {
      name: 'service no longer desired: remove all its containers, crashed or not',
      desired: desired(),
      actual: [container('gone', 'd9', 0, { id: 'g0' }), crashed('gone', 'd9', 1, 10, { id: 'g1' })],
      expected: ['remove g0 not-desired', 'remove g1 not-desired'],
    },
    {
      name: 'duplicates of one slot: keep the running one, remove the rest',
      desired: desired(web1),
      actual: [
        crashed('web', 'd1', 0, 60_000, { id: 'dead', createdAt: NOW - 1_000 }),
        container('web', 'd1', 0, { id: 'live', createdAt: NOW - 90_000 }),
        container('web', 'd1', 0, { id: 'older', createdAt: NOW - 120_000 }),
      ],
      expected: ['remove older duplicate', 'remove dead duplicate'],
    },
    {
      name: 'duplicates, all running: keep the newest',
      desired: desired(web1),
      actual: [container('web', 'd1', 0, { id: 'a', createdAt: NOW - 10 }), container('web', 'd1', 0, { id: 'b', createdAt: NOW - 5 })],
      expected: ['remove a duplicate'],
    },
    {
      name: 'scale up: create the missing slots only',
      desired: desired(workload('web', 'd1', 3)),
      actual: [container('web', 'd1', 0, { id: 'r0' })],
      expected: ['create web d1 [1,2]'],
    },
    {
      name: 'scale down: remove slots past the replica count',
      desired: desired(workload('web', 'd1', 1)),
      actual: [container('web', 'd1', 0, { id: 'r0' }), container('web', 'd1', 1, { id: 'r1' }), container('web', 'd1', 2, { id: 'r2' })],
      expected: ['remove r1 scale-down', 'remove r2 scale-down'],
    },
    {
      name: 'scale to zero: remove every replica',
      desired: desired(workload('web', 'd1', 0)),
      actual: [container('web', 'd1', 0, { id: 'r0' })],
      expected: ['remove r0 scale-down'],
    },
    {
      name: 'a container without a replica slot label fills no slot: removed, slot created',
      desired: desired(web1),
      actual: [container('web', 'd1', null, { id: 'stray' })],
      expected: ['remove stray orphan', 'create web d1 [0]'],
    },
    {
      name: 'held (failed) deployment desired: keep the old one serving, no new attempt',
      desired: desired(web2),
      actual: [container('web', 'd1', 0, { id: 'old' })],
      ctx: { held: new Set(['d2']) },
      expected: [],
    },
    {
      name: 'held deployment: its leftovers go, the old one is still restarted when it crashes',
      desired: desired(web2),
      actual: [crashed('web', 'd1', 0, 5_000, { id: 'old' }), container('web', 'd2', 0, { id: 'left' })],
      ctx: { held: new Set(['d2']) },
      expected: ['remove left orphan', 'restart old attempt 1'],
    },
    {
      name: 'stale desired set names a superseded deployment: no rollback',
      desired: desired(web1),
      actual: [container('web', 'd2', 0, { id: 'current' })],
      ctx: { held: new Set(['d1']) },
      expected: [],
    },
    {
      name: 'desired not known yet (agent just started): keep alive only, create and remove nothing',
      desired: null,
      actual: [container('web', 'd1', 0, { id: 'a' }), crashed('api', 'd5', 0, 5_000, { id: 'b' })],
      expected: ['restart b attempt 1'],
    },
    {
      name: 'several services: ordered by service id, each planned on its own',
      desired: desired(workload('b', 'b2'), workload('a', 'a1')),
      actual: [container('b', 'b1', 0, { id: 'b-old' }), container('c', 'c1', 0, { id: 'c0' })],
      expected: ['create a a1 [0]', 'replace b b2 new [0] keep [] retire [b-old]', 'remove c0 not-desired'],
    },
    {
      name: 'a draining container belongs to its drain: not retired again, not removed, not restarted',
      desired: desired(workload('b', 'b3'), workload('c', 'c2')),
      actual: [
        container('b', 'b3', 0, { id: 'b-new' }),
        container('b', 'b2', 0, { id: 'b-draining' }),
        container('c', 'c1', 0, { id: 'c-draining', state: 'exited', exitCode: 0, finishedAt: NOW - 60_000 }),
        container('d', 'd1', 0, { id: 'd-draining' }),
      ],
      ctx: { draining: new Set(['b-draining', 'c-draining', 'd-draining']) },
      expected: ['create c c2 [0]'],
    },
    {
      name: 'desired unknown: a draining container that exited is not started again',
      desired: null,
      actual: [crashed('b', 'b2', 0, 60_000, { id: 'b-draining' })],
      ctx: { draining: new Set(['b-draining']) },
      expected: [],
    },
  ];

  it.each(cases)('$name', ({ desired: d, actual, ctx: over, expected }) => {
    expect(summary(plan(d, actual, ctx(over)))).toEqual(expected);
  });

  it('is pure: the same input twice gives the same plan, and the input is not changed', () => {
    const actual = [container('web', 'd1', 0, { id: 'old' }), crashed('api', 'a1', 0, 10_000, { id: 'c' })];
    const copy = structuredClone(actual);
    const d = desired(web2, workload('api', 'a1'));
    expect(plan(d, actual, ctx())).toEqual(plan(d, actual, ctx()));
    expect(actual).toEqual(copy);
  });
});

describe('restartDelay()', () => {
  it.each([
    [1, 1_000],
    [2, 2_000],
    [3, 4_000],
    [4, 8_000],
    [9, 8_000],
  ])('attempt %i waits %i ms (doubling, capped)', (attempt, ms) => {
    expect(restartDelay(attempt, { initialMs: 1_000, maxMs: 8_000 })).toBe(ms);
  });
});
