import { describe, expect, it } from 'vitest';
import type { RoutingStatus } from '@tether/protocol';
import type { RoutingApplyResult, RoutingController, RoutingMapInput } from '../src/controllers.js';
import { layered } from '../src/routing-layer.js';

// A layer adds only what it names; every other member stays the inner
// controller's own, called on it (the hand-copied wrappers lost any member
// they did not know).

class Inner implements RoutingController {
  applied = 0;
  readonly calls: string[];
  readonly traffic = { switchAnswers: async () => undefined, openConnections: async () => 0 };
  constructor(calls: string[], private readonly failing = false) {
    this.calls = calls;
  }
  async start() {
    this.calls.push('inner start');
  }
  async stop() {
    this.calls.push('inner stop');
  }
  async apply(map: RoutingMapInput): Promise<RoutingApplyResult> {
    this.applied += 1;
    return { hash: map.hash, changed: true, reloaded: false, error: this.failing ? 'proxy down' : null, routing: this.status() };
  }
  status(): RoutingStatus {
    return { appliedHash: `h${this.applied}` } as unknown as RoutingStatus;
  }
  answerer() {
    return { state: 'answering', applied: this.applied } as never;
  }
  /** Not in RoutingController: stands for a member added later that no layer knows. */
  later(): number {
    return this.applied;
  }
}

const map = (hash: string): RoutingMapInput => ({ version: 1, hash, routes: [] });

describe('layered routing controllers', () => {
  it('start inner first, stop outer first, with two layers; apply and status carry every layer\'s fields', async () => {
    const calls: string[] = [];
    const inner = new Inner(calls);
    const seen: string[] = [];
    const probed = layered(inner, {
      start: () => void calls.push('probes start'),
      stop: () => void calls.push('probes stop'),
      applied: (m) => seen.push(m.hash),
      status: (s) => ({ ...s, probes: [] }) as RoutingStatus,
      members: { probesRoutes: true },
    });
    const outer = layered(probed, {
      start: async () => void calls.push('canary start'),
      stop: async () => void calls.push('canary stop'),
      status: (s) => ({ ...s, canary: { connected: true } }) as unknown as RoutingStatus,
    });
    await outer.start();
    await outer.stop();
    expect(calls).toEqual(['inner start', 'probes start', 'canary start', 'canary stop', 'probes stop', 'inner stop']);

    const result = await outer.apply(map('a'));
    expect(result.routing).toEqual({ appliedHash: 'h1', probes: [], canary: { connected: true } });
    expect(outer.status()).toEqual({ appliedHash: 'h1', probes: [], canary: { connected: true } });
    expect(seen).toEqual(['a']);
    expect(outer.probesRoutes).toBe(true);
  });

  it('members the layers do not name are the inner controller\'s, bound to it, known or added later', async () => {
    const inner = new Inner([]);
    const outer = layered(layered(inner, {}), { members: { probesRoutes: true } }) as RoutingController & { later(): number };
    await outer.apply(map('a'));
    const { answerer, later } = outer;
    // Detached calls still act on the inner controller (its `this`), not on a copy or on the proxy.
    expect(answerer!()).toEqual({ state: 'answering', applied: 1 });
    expect(later()).toBe(1);
    expect(outer.traffic).toBe(inner.traffic);
    expect('answerer' in outer && 'traffic' in outer && 'probesRoutes' in outer).toBe(true);
    expect(inner.applied).toBe(1);
    expect(Object.prototype.hasOwnProperty.call(inner, 'probesRoutes')).toBe(false);
  });

  it('a map the inner controller failed to apply is not handed to the layer; its status is still decorated', async () => {
    const seen: string[] = [];
    const outer = layered(new Inner([], true), { applied: (m) => seen.push(m.hash), status: (s) => ({ ...s, probes: [] }) as RoutingStatus });
    const result = await outer.apply(map('b'));
    expect(result.error).toBe('proxy down');
    expect(result.routing).toEqual({ appliedHash: 'h1', probes: [] });
    expect(seen).toEqual([]);
  });

  it('a controller without optional members stays without them', () => {
    const bare: RoutingController = { start: async () => undefined, stop: async () => undefined, apply: async () => ({}) as never, status: () => ({}) as never };
    const outer = layered(bare, {});
    expect(outer.answerer).toBeUndefined();
    expect(outer.traffic).toBeUndefined();
    expect('answerer' in outer).toBe(false);
  });
});
