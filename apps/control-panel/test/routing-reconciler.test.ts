import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { WebSocket } from 'ws';
import { decode, type Route } from '@tether/protocol';
import { wireRouting } from '../src/agent-side.js';
import { PanelEvents } from '../src/panel-events.js';
import { routingMapContent, type RoutingMapSource } from '../src/routing/routing-map.js';
import { RoutingReconciler } from '../src/routing/routing-reconciler.js';
import { SessionRegistry } from '../src/sessions/registry.js';
import { AgentSession } from '../src/sessions/session.js';
import type { SessionStore } from '../src/sessions/session-store.js';

// The panel's push schedule with fake timers: on open, debounced on change,
// periodic with jitter, and drift detection. The session is real; its socket
// is a stub that records frames and ACKs them.

const INTERVAL = 300_000;
const DEBOUNCE = 250;
const logger = pino({ level: 'silent' });
const noStore = new Proxy({}, { get: () => async () => [] }) as SessionStore;

function route(i: number): Route {
  return { domain: `app-${i}.example.com`, pathPrefix: null, serviceId: `s${i}`, upstream: `svc-s${i}:80` };
}

let maps: { routes: Route[]; calls: number };
let registry: SessionRegistry;
let events: PanelEvents;
let reconciler: RoutingReconciler;
let random: number;

function connect(nodeId: string) {
  const frames: { type: string; id: string; hash?: string; at: number }[] = [];
  const acked: { session?: AgentSession } = {};
  const socket = {
    bufferedAmount: 0,
    send(text: string) {
      const result = decode(text, { maxBytes: 64 * 1024 * 1024 });
      if (!result.ok) throw new Error(result.error.message);
      const m = result.message as { type: string; id: string; hash?: string };
      frames.push({ ...m, at: Date.now() });
      queueMicrotask(() => acked.session?.acknowledge(m.id));
    },
    close() {},
    terminate() {},
  } as unknown as WebSocket;
  const session = new AgentSession(socket, nodeId, nodeId, 'test', 'test', { idleTimeoutMs: 10 * INTERVAL, ackTimeoutMs: 10_000, sendBufferLimitBytes: 1e9 }, registry.onTeardown);
  acked.session = session;
  registry.open(session);
  return { session, pushes: () => frames.filter((f) => f.type === 'routing.map') };
}

beforeEach(() => {
  vi.useFakeTimers();
  random = 0.5;
  maps = { routes: [route(1)], calls: 0 };
  const source: RoutingMapSource = {
    mapFor: async () => {
      maps.calls++;
      return routingMapContent(maps.routes);
    },
  };
  registry = new SessionRegistry({ store: noStore, logger, pingIntervalMs: 10 * INTERVAL, lastSeenFlushMs: 10 * INTERVAL });
  events = new PanelEvents();
  reconciler = new RoutingReconciler({
    sessions: registry,
    maps: source,
    reloads: { reloaded: async () => {} },
    logger,
    intervalMs: INTERVAL,
    debounceMs: DEBOUNCE,
    tickMs: 1_000,
    random: () => random,
  });
  wireRouting(registry, events, reconciler);
  reconciler.start();
});

afterEach(async () => {
  await reconciler.stop();
  vi.useRealTimers();
});

describe('routing pushes', () => {
  it('pushes the complete map at once when a session opens', async () => {
    const agent = connect('n1');
    await vi.advanceTimersByTimeAsync(0);
    expect(agent.pushes()).toHaveLength(1);
    expect(agent.pushes()[0]!.hash).toBe(routingMapContent([route(1)]).hash);
  });

  it('pushes periodically, jittered within ±50% of the interval, and never before', async () => {
    random = 0; // the earliest the jitter allows: 0.5 × interval
    const agent = connect('n1');
    await vi.advanceTimersByTimeAsync(0);
    random = 0.999; // the next one scheduled lands as late as the jitter allows: just under 1.5 × interval
    await vi.advanceTimersByTimeAsync(INTERVAL / 2 - 1_001);
    expect(agent.pushes()).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(agent.pushes()).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(INTERVAL * 1.5 - 2_000);
    expect(agent.pushes()).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(3_000);
    expect(agent.pushes()).toHaveLength(3);
    // The periodic push reuses the computed map: no database read when nothing changed.
    expect(maps.calls).toBe(1);
  });

  it('spreads a fleet that connected together across the window', async () => {
    const agents = Array.from({ length: 50 }, (_, i) => {
      random = i / 50;
      return connect(`n${i}`);
    });
    await vi.advanceTimersByTimeAsync(0);
    const pushTimes: number[] = [];
    const t0 = Date.now();
    await vi.advanceTimersByTimeAsync(INTERVAL * 1.5);
    for (const a of agents) pushTimes.push(a.pushes()[1]!.at - t0);
    const spread = Math.max(...pushTimes) - Math.min(...pushTimes);
    expect(spread).toBeGreaterThan(INTERVAL * 0.9);
  });

  it('coalesces a burst of 20 changes inside the debounce window into one push', async () => {
    const agent = connect('n1');
    await vi.advanceTimersByTimeAsync(0);
    const callsBefore = maps.calls;
    for (let i = 2; i < 22; i++) {
      maps.routes = [...maps.routes, route(i)];
      events.emit('routing.changed', { nodeIds: ['n1'], reason: `attached app-${i}.example.com` });
      await vi.advanceTimersByTimeAsync(10);
    }
    expect(agent.pushes()).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(DEBOUNCE);
    expect(agent.pushes()).toHaveLength(2);
    expect(agent.pushes()[1]!.hash).toBe(routingMapContent(maps.routes).hash);
    expect(maps.calls).toBe(callsBefore + 1);
    await vi.advanceTimersByTimeAsync(DEBOUNCE * 4);
    expect(agent.pushes()).toHaveLength(2);
  });

  it('flags a node whose applied hash differs from the desired one for longer than a push cycle', async () => {
    const agent = connect('n1');
    await vi.advanceTimersByTimeAsync(0);
    const desired = routingMapContent(maps.routes).hash;
    const status = { reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null };
    registry.received(agent.session, { type: 'heartbeat', id: 'h1', seq: 0, containers: [], runtime: { available: true, error: null }, routing: { appliedHash: 'stale', ...status } });
    expect(reconciler.forNode('n1')).toMatchObject({ desiredHash: desired, appliedHash: 'stale', drifting: false });
    await vi.advanceTimersByTimeAsync(INTERVAL + 1);
    expect(reconciler.forNode('n1').drifting).toBe(true);
    registry.received(agent.session, { type: 'heartbeat', id: 'h2', seq: 1, containers: [], runtime: { available: true, error: null }, routing: { appliedHash: desired, ...status } });
    expect(reconciler.forNode('n1')).toMatchObject({ appliedHash: desired, drifting: false });
  });
});
