import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { WebSocket } from 'ws';
import { decode, type Route } from '@tether/protocol';
import { wireRouting } from '../src/agent-side.js';
import { PanelEvents } from '../src/panel-events.js';
import { routingMapContent, type RoutingMapSource } from '../src/routing/routing-map.js';
import { RoutingReconciler } from '../src/routing/routing-reconciler.js';
import { FrameRouter } from '../src/sessions/frame-router.js';
import { SessionRegistry } from '../src/sessions/registry.js';
import { AgentSession } from '../src/sessions/session.js';
import type { SessionStore } from '../src/session-writes/session-store.js';

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
let unwire: () => void;
let frames: FrameRouter;

/** The agent side's wiring for one reconciler: its sessions, its frames, and the routing part of a heartbeat. */
function wire(r: RoutingReconciler): () => void {
  const offRouting = wireRouting(registry, frames, events, r);
  const offHeartbeat = frames.handle('heartbeat', (session, message) => r.heartbeat(session, message));
  return () => {
    offRouting();
    offHeartbeat();
  };
}

/** Replaces the reconciler of beforeEach (unwired, so it pushes nothing more) with one built from `options`. */
async function replaceReconciler(options: Omit<ConstructorParameters<typeof RoutingReconciler>[0], 'sessions' | 'logger'>) {
  unwire();
  await reconciler.stop();
  reconciler = new RoutingReconciler({ sessions: registry, logger, ...options });
  unwire = wire(reconciler);
  reconciler.start();
}

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
  frames = new FrameRouter();
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
  unwire = wire(reconciler);
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
    frames.route(agent.session, { type: 'heartbeat', id: 'h1', seq: 0, containers: [], runtime: { available: true, error: null }, routing: { appliedHash: 'stale', ...status } });
    expect(reconciler.forNode('n1')).toMatchObject({ desiredHash: desired, appliedHash: 'stale', drifting: false });
    await vi.advanceTimersByTimeAsync(INTERVAL + 1);
    expect(reconciler.forNode('n1').drifting).toBe(true);
    frames.route(agent.session, { type: 'heartbeat', id: 'h2', seq: 1, containers: [], runtime: { available: true, error: null }, routing: { appliedHash: desired, ...status } });
    expect(reconciler.forNode('n1')).toMatchObject({ appliedHash: desired, drifting: false });
  });
});

describe('debounce window', () => {
  it('a periodic push due inside the window waits for it: one push of the whole burst, never half of it', async () => {
    // A periodic interval far shorter than the debounce: before the fix a periodic push recomputed the map mid-burst.
    const short = 40;
    await replaceReconciler({
      maps: { mapFor: async () => routingMapContent(maps.routes) },
      reloads: { reloaded: async () => {} },
      intervalMs: short,
      debounceMs: DEBOUNCE,
      jitterRatio: 0,
      tickMs: 10,
    });
    const agent = connect('n1');
    await vi.advanceTimersByTimeAsync(0);
    const before = agent.pushes().length;
    const burstStart = Date.now();
    const hashesBefore = new Set(agent.pushes().map((p) => p.hash));
    for (let i = 2; i < 22; i++) {
      maps.routes = [...maps.routes, route(i)];
      events.emit('routing.changed', { nodeIds: ['n1'], reason: `attached app-${i}.example.com` });
      await vi.advanceTimersByTimeAsync(10);
    }
    // The window is fixed from the first change: it closes DEBOUNCE after it, though changes kept coming.
    await vi.advanceTimersByTimeAsync(DEBOUNCE - 200 + 5);
    const full = routingMapContent(maps.routes).hash;
    const during = agent.pushes().slice(before).filter((p) => p.at < burstStart + DEBOUNCE);
    const after = agent.pushes().slice(before).filter((p) => p.at >= burstStart + DEBOUNCE);
    expect(during).toEqual([]);
    expect(after.map((p) => p.hash)).toEqual([full]);
    // Nothing but the old map or the whole burst ever went out.
    for (const p of agent.pushes()) expect(hashesBefore.has(p.hash!) || p.hash === full).toBe(true);
    // Periodic pushes resume after the window.
    await vi.advanceTimersByTimeAsync(short * 3);
    expect(agent.pushes().length).toBeGreaterThan(before + 1);
  });
});

describe('proxy.events', () => {
  const events2 = (seqs: number[]) =>
    seqs.map((seq) => ({ event: 'reload' as const, epoch: 1, seq, at: '2026-12-01T00:00:00.000Z', kind: 'repair-empty' as const, hashBefore: 'a', hashAfter: 'a', reason: 'repaired' }));

  it('stores each message, then ACKs it; a failed store is not ACKed; reloaded routing.applied is not recorded twice', async () => {
    const stored: number[][] = [];
    const recorded: string[] = [];
    let fail = false;
    const acks: string[] = [];
    await replaceReconciler({
      maps: { mapFor: async () => routingMapContent(maps.routes) },
      reloads: { reloaded: async (r) => void recorded.push(r.reason) },
      events: {
        store: async (_node, evs) => {
          if (fail) throw new Error('database down');
          stored.push(evs.map((e) => e.seq));
          return evs;
        },
      },
      intervalMs: INTERVAL,
      debounceMs: DEBOUNCE,
    });
    const agent = connect('n1');
    agent.session.setCapabilities(['proxy.events']);
    const send = agent.session.send.bind(agent.session);
    agent.session.send = (m, ...rest) => {
      if (m.type === 'ack') acks.push(m.ref);
      return send(m, ...rest);
    };
    frames.route(agent.session, { type: 'proxy.events', id: 'e1', events: events2([0, 1]) });
    await vi.advanceTimersByTimeAsync(0);
    expect(stored).toEqual([[0, 1]]);
    expect(acks).toEqual(['e1']);
    fail = true;
    frames.route(agent.session, { type: 'proxy.events', id: 'e2', events: events2([2]) });
    await vi.advanceTimersByTimeAsync(0);
    expect(acks).toEqual(['e1']);
    // With the capability, routing.applied's reloaded flag records nothing: the event is the record.
    const status = { appliedHash: 'a', reloadsTotal: 1, reloadsToday: 1, lastReloadAt: null, lastReloadReason: 'added x' };
    frames.route(agent.session, { type: 'routing.applied', id: 'r1', ref: 'x', hash: 'a', changed: true, reloaded: true, error: null, routing: status });
    frames.route(agent.session, { type: 'routing.applied', id: 'r2', ref: 'y', hash: 'a', changed: false, reloaded: false, error: 'PROXY_TIMEOUT: x', routing: status });
    await vi.advanceTimersByTimeAsync(0);
    expect(recorded).toEqual([]);
    expect(reconciler.forNode('n1').pushes).toMatchObject({ applied: 1, failed: 1 });
  });
});
