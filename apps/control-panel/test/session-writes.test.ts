import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '@tether/testkit';
import type { SessionStore } from '../src/session-writes/session-store.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// Heartbeats are handled in memory. The database sees session opens and
// closes, and last-seen times in batches: its write count must not grow with
// the number of heartbeats.

const FLUSH_MS = 250;
const calls: string[] = [];
let panel: Panel;

function counting(store: SessionStore): SessionStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.push(String(prop));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

beforeAll(async () => {
  panel = await startPanel({
    env: { TETHER_LAST_SEEN_FLUSH_MS: String(FLUSH_MS), TETHER_SESSION_IDLE_MS: '5000', TETHER_PING_INTERVAL_MS: '60000' },
    wrapStore: counting,
  });
});
afterAll(async () => panel?.close());

async function heartbeatWindow(agents: RawAgent[], perAgent: number, windowMs: number) {
  const before = calls.length;
  const registry = panel.app.agentSide.registry;
  const beats = () => agents.reduce((sum, a) => sum + (registry.list().find((s) => s.id === a.welcome.sessionId)?.heartbeats ?? 0), 0);
  const beatsBefore = beats();
  const started = Date.now();
  const gap = windowMs / perAgent;
  for (let i = 0; i < perAgent; i++) {
    for (const a of agents) a.heartbeat();
    await new Promise((r) => setTimeout(r, gap));
  }
  await new Promise((r) => setTimeout(r, Math.max(0, windowMs - (Date.now() - started))));
  await waitFor(() => beats() - beatsBefore >= agents.length * perAgent);
  return { writes: calls.slice(before), heartbeats: beats() - beatsBefore };
}

describe('heartbeat path', () => {
  it('writes last-seen times in batches: database writes do not grow with the heartbeat count', async () => {
    const agents: RawAgent[] = [];
    for (let i = 0; i < 10; i++) {
      const node = await panel.createNode(`beater-${i}`);
      agents.push(await RawAgent.connect({ url: panel.url, token: node.token }));
    }
    await waitFor(() => calls.filter((c) => c === 'sessionOpened').length === 10);
    await new Promise((r) => setTimeout(r, FLUSH_MS * 2));

    const light = await heartbeatWindow(agents, 5, 1_500);
    const heavy = await heartbeatWindow(agents, 60, 1_500);
    expect(heavy.heartbeats).toBeGreaterThanOrEqual(10 * light.heartbeats);

    // Only batched flushes happened, one per flush interval at most, whatever the heartbeat rate.
    for (const window of [light, heavy]) {
      expect(new Set(window.writes)).toEqual(new Set(['flushLastSeen']));
      expect(window.writes.length).toBeLessThanOrEqual(Math.ceil(1_500 / FLUSH_MS) + 1);
    }
    expect(Math.abs(heavy.writes.length - light.writes.length)).toBeLessThanOrEqual(2);

    // And the batch really lands: last_seen_at is fresh for every node.
    const rows = await panel.prisma.node.findMany({ where: { name: { startsWith: 'beater-' } } });
    for (const row of rows) expect(Date.now() - row.lastSeenAt!.getTime()).toBeLessThan(FLUSH_MS * 4);
    for (const a of agents) a.close();
  });
});
