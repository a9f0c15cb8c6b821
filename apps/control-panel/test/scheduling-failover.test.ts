import { describe, expect, it } from 'vitest';
import { FENCE_MARGIN_MS, failoverView, fencedReplaceAt, holdFenced, paceReplacements, type NodeLiveness } from '../src/scheduling/failover-policy.js';
import { rolloutLimits } from '../src/scheduling/rollout-plan.js';
import { schedule } from '../src/scheduling/schedule.js';
import { alloc, node, service } from './scheduling/fixtures.js';

// When an unreachable node is lost (issue 38), as a pure function: the grace
// from the liveness truth, the brake on mass failure and on the control
// plane's own hiccups, the pacing of re-placements, and the longer wait of
// fenced replicas (until their agent has certainly stopped them).

const GRACE = 60_000;
const settings = { rescheduleAfterMs: GRACE, maxUnreachableFraction: 0.3 };
const T0 = 1_000_000_000_000;
/** A panel up long enough and no recent database outage: no brake from the clock. */
const steady = { panelStartedAt: T0 - 10 * GRACE, databaseBackAt: null };

const live = (name: string): NodeLiveness => ({ id: `n-${name}`, name, live: true, decommissioned: false, lostByOperator: false, downSince: null });
const down = (name: string, since: number): NodeLiveness => ({ ...live(name), live: false, downSince: since });
const fleet = (count: number) => Array.from({ length: count }, (_, i) => live(`node-${i}`));

describe('failoverView', () => {
  it('a node is lost exactly one grace after it went down: unreachable 1 ms before, lost at the grace', () => {
    const nodes = [...fleet(9), down('a', T0)];
    expect(failoverView(nodes, T0 + GRACE - 1, settings, steady).states.get('n-a')).toBe('unreachable');
    expect(failoverView(nodes, T0 + GRACE - 1, settings, steady).nextChangeAt).toBe(T0 + GRACE);
    expect(failoverView(nodes, T0 + GRACE, settings, steady).states.get('n-a')).toBe('lost');
    expect(failoverView(nodes, T0 + GRACE, settings, steady).brake).toBeNull();
  });

  it('a node back within the grace is live again and loses nothing', () => {
    const view = failoverView([...fleet(9), live('a')], T0 + GRACE + 1, settings, steady);
    expect(view.states.get('n-a')).toBe('live');
    expect([...view.states.values()].every((s) => s === 'live')).toBe(true);
  });

  it('more than the share unreachable at once: nothing is lost, the brake says why', () => {
    // 3 of 10 is 30 %, not more: moves; 4 of 10 brakes.
    const three = [...fleet(7), down('a', T0), down('b', T0), down('c', T0)];
    expect(failoverView(three, T0 + GRACE, settings, steady).brake).toBeNull();
    const four = [...three, down('d', T0)].slice(1);
    const view = failoverView(four, T0 + 10 * GRACE, settings, steady);
    expect(view.brake).toEqual({ reason: 'TOO_MANY_UNREACHABLE', unreachable: 4, nodes: 10 });
    expect([...view.states.values()].filter((s) => s === 'lost')).toEqual([]);
    // A small fleet: one node of three down is past 30 % but never brakes (it is lost after the grace); two do.
    const small = [...fleet(2), down('a', T0)];
    const one = failoverView(small, T0 + GRACE, settings, steady);
    expect(one.brake).toBeNull();
    expect(one.states.get('n-a')).toBe('lost');
    expect(failoverView([...fleet(1), down('a', T0), down('b', T0)], T0 + GRACE, settings, steady).brake).toEqual({ reason: 'TOO_MANY_UNREACHABLE', unreachable: 2, nodes: 3 });
  });

  it('within one grace of a panel start or of a database outage ending: brake, then the grace counts as usual', () => {
    const nodes = [...fleet(9), down('a', T0 - 5 * GRACE)];
    const started = failoverView(nodes, T0, settings, { panelStartedAt: T0 - 1_000, databaseBackAt: null });
    expect(started.brake).toEqual({ reason: 'PANEL_STARTED', until: T0 - 1_000 + GRACE });
    expect(started.states.get('n-a')).toBe('unreachable');
    expect(started.nextChangeAt).toBe(T0 - 1_000 + GRACE);
    const afterOutage = failoverView(nodes, T0, settings, { ...steady, databaseBackAt: T0 - 2_000 });
    expect(afterOutage.brake).toEqual({ reason: 'DATABASE_RECOVERED', until: T0 - 2_000 + GRACE });
    expect(failoverView(nodes, T0 - 2_000 + GRACE, settings, { ...steady, databaseBackAt: T0 - 2_000 }).states.get('n-a')).toBe('lost');
    // Every node still connecting after the start is that start, not a mass failure (an info line, not the warning).
    const connecting = [down('a', T0 - 1_000), down('b', T0 - 1_000), down('c', T0 - 1_000)];
    expect(failoverView(connecting, T0, settings, { panelStartedAt: T0 - 1_000, databaseBackAt: null }).brake?.reason).toBe('PANEL_STARTED');
    expect(failoverView(connecting, T0 - 1_000 + GRACE, settings, { panelStartedAt: T0 - 1_000, databaseBackAt: null }).brake?.reason).toBe('TOO_MANY_UNREACHABLE');
  });

  it('a partition healing node by node: the nodes still away when the share drops back wait one more grace', () => {
    // 2 of 3 were away past the grace (brake); one came back: the other is not lost until a grace after the last braked evaluation.
    const nodes = [...fleet(2), down('a', T0)];
    const recent = failoverView(nodes, T0 + 3 * GRACE, settings, { ...steady, manyUnreachableAt: T0 + 3 * GRACE - 100 });
    expect(recent.brake).toEqual({ reason: 'MANY_UNREACHABLE_RECENTLY', until: T0 + 4 * GRACE - 100 });
    expect(recent.states.get('n-a')).toBe('unreachable');
    expect(recent.nextChangeAt).toBe(T0 + 4 * GRACE - 100);
    expect(failoverView(nodes, T0 + 4 * GRACE - 100, settings, { ...steady, manyUnreachableAt: T0 + 3 * GRACE - 100 }).states.get('n-a')).toBe('lost');
  });

  it('an operator\'s "lost" and a decommission are lost at once, brake or not, and do not count toward the share', () => {
    const nodes = [...fleet(2), down('a', T0), { ...down('gone', T0), lostByOperator: true }, { ...live('old'), decommissioned: true }];
    const view = failoverView(nodes, T0 + 1, settings, { panelStartedAt: T0, databaseBackAt: null });
    // A brake holds (the panel just started; 1 of 3 counted nodes down is not too many), and these are lost anyway.
    expect(view.brake?.reason).toBe('PANEL_STARTED');
    expect(view.states.get('n-gone')).toBe('lost');
    expect(view.states.get('n-old')).toBe('lost');
    expect(view.states.get('n-a')).toBe('unreachable');
  });

  it('a node down with no recorded time waits a whole grace from now, never from the epoch', () => {
    const view = failoverView([...fleet(9), { ...down('a', T0), downSince: null }], T0, settings, steady);
    expect(view.states.get('n-a')).toBe('unreachable');
    expect(view.nextChangeAt).toBe(T0 + GRACE);
  });
});

describe('paceReplacements', () => {
  // Three services with one replica each on node a, which is lost; b and c take them.
  const services = [service('old', 1), service('mid', 1), service('new', 1)];
  const allocations = [alloc('x-old', 'old', 'a', 1), alloc('x-mid', 'mid', 'a', 2), alloc('x-new', 'new', 'a', 3)];
  const result = schedule(services, [node('a', { state: 'lost' }), node('b'), node('c')], allocations);
  const createdAt = new Map([['old', 10], ['mid', 20], ['new', 30]]);

  it('keeps the oldest services\' replacements within the budget and leaves the others\' lost allocations in place', () => {
    expect(result.place).toHaveLength(3);
    const paced = paceReplacements(result, 2, createdAt);
    expect(paced.deferred).toBe(1);
    expect(paced.result.place.map((p) => p.serviceId).sort()).toEqual(['mid', 'old']);
    expect(paced.result.stop.map((s) => s.allocationId).sort()).toEqual(['x-mid', 'x-old']);
  });

  it('passes everything through within the budget, and nothing with a budget of 0', () => {
    expect(paceReplacements(result, 3, createdAt)).toEqual({ result, deferred: 0 });
    const none = paceReplacements(result, 0, createdAt);
    expect(none.deferred).toBe(3);
    expect(none.result.place).toEqual([]);
    expect(none.result.stop).toEqual([]);
  });
});

describe('fenced replicas (failover.fence, workload.fence)', () => {
  const FENCE = { afterMs: 30_000, stopTimeoutMs: 10_000 };
  /** teardown + the agent's fence deadline + its stop grace + the margin: 45 s here, under the 60 s grace. */
  const fencedDown = (name: string, since: number, fence = FENCE): NodeLiveness => ({ ...down(name, since), fence });

  it('the bound is teardown + fenceAfter + stop grace + margin, never before the grace, and the grace alone for an agent that does not fence', () => {
    expect(FENCE_MARGIN_MS).toBe(5_000);
    expect(fencedReplaceAt(T0, GRACE, { afterMs: 60_000, stopTimeoutMs: 10_000 })).toBe(T0 + 75_000);
    expect(fencedReplaceAt(T0, GRACE, FENCE)).toBe(T0 + GRACE);
    expect(fencedReplaceAt(T0, 1_000, { afterMs: 600, stopTimeoutMs: 1_000 })).toBe(T0 + 600 + 1_000 + FENCE_MARGIN_MS);
    expect(fencedReplaceAt(T0, GRACE, null)).toBe(T0 + GRACE);
    expect(fencedReplaceAt(T0, GRACE, undefined)).toBe(T0 + GRACE);
  });

  it('a lost node holds its fenced replicas from the grace until the bound: held 1 ms before, released at it, the change time named', () => {
    const slow = { afterMs: 60_000, stopTimeoutMs: 10_000 };
    const nodes = [...fleet(9), fencedDown('a', T0, slow)];
    const atGrace = failoverView(nodes, T0 + GRACE, settings, steady);
    expect(atGrace.states.get('n-a')).toBe('lost');
    expect([...atGrace.fenceHeld]).toEqual(['n-a']);
    expect(atGrace.nextChangeAt).toBe(T0 + 75_000);
    expect([...failoverView(nodes, T0 + 75_000 - 1, settings, steady).fenceHeld]).toEqual(['n-a']);
    const atBound = failoverView(nodes, T0 + 75_000, settings, steady);
    expect([...atBound.fenceHeld]).toEqual([]);
    expect(atBound.nextChangeAt).toBeNull();
    // Before the grace the node is not lost at all; both times are ahead.
    const early = failoverView(nodes, T0 + 1_000, settings, steady);
    expect(early.states.get('n-a')).toBe('unreachable');
    expect(early.fenceHeld.size).toBe(0);
    expect(early.nextChangeAt).toBe(T0 + GRACE);
    // A short fence under the grace: nothing held, the grace decides.
    expect(failoverView([...fleet(9), fencedDown('b', T0)], T0 + GRACE, settings, steady).fenceHeld.size).toBe(0);
  });

  it('an operator\'s "lost" and a decommission hold nothing: the host is gone', () => {
    const nodes = [...fleet(2), { ...fencedDown('gone', T0), lostByOperator: true }, { ...fencedDown('old', T0), decommissioned: true }];
    expect(failoverView(nodes, T0 + 1, settings, steady).fenceHeld.size).toBe(0);
  });

  it('holdFenced keeps a fenced service\'s lost replica (no stop, no replacement) and lets every other replacement through', () => {
    const services = [service('lock', 1, { fenced: true }), service('web', 1)];
    const allocations = [alloc('x-lock', 'lock', 'a', 1), alloc('x-web', 'web', 'a', 2)];
    const result = schedule(services, [node('a', { state: 'lost' }), node('b'), node('c')], allocations);
    expect(result.place.map((p) => p.serviceId).sort()).toEqual(['lock', 'web']);
    const held = holdFenced(result, new Set(['lock']), new Set(['n-a']));
    expect(held.place.map((p) => p.serviceId)).toEqual(['web']);
    expect(held.stop.map((s) => s.allocationId)).toEqual(['x-web']);
    // Released (the node not held), or no fenced service: unchanged.
    expect(holdFenced(result, new Set(['lock']), new Set())).toBe(result);
    expect(holdFenced(result, new Set(), new Set(['n-a']))).toBe(result);
    expect(holdFenced(result, new Set(['lock']), new Set(['n-b']))).toBe(result);
  });

  it('a fenced service rolls out with maxSurge 0 and maxUnavailable 1, and refuses a surge', () => {
    expect(rolloutLimits(service('lock', 1, { fenced: true }))).toEqual({ maxSurge: 0, maxUnavailable: 1 });
    expect(rolloutLimits(service('web', 1))).toEqual({ maxSurge: 1, maxUnavailable: 0 });
    expect(() => rolloutLimits(service('lock', 1, { fenced: true }), { maxSurge: 1 })).toThrow(/fenced service rolls out with maxSurge 0/);
  });
});
