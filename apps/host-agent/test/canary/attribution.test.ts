import { describe, expect, it } from 'vitest';
import { attributeDrop } from '../../src/canary/index.js';
import type { ReloadRecord } from '../../src/proxy/index.js';

// The cause a drop is given, from what the agent knows. Real drops are in canary.test.ts.

const t0 = Date.parse('2026-12-01T05:00:00.000Z');
const reload = (kind: ReloadRecord['kind'], startMs: number, endMs: number, reason = 'added a.example.com'): ReloadRecord => ({
  kind,
  reason,
  startedAt: new Date(t0 + startMs),
  at: new Date(t0 + endMs),
  hashBefore: 'a',
  hashAfter: 'b',
});

describe('drop attribution', () => {
  it('a drop inside a change or drift load is that reload, with its reason', () => {
    expect(attributeDrop({ openedAt: t0 - 600_000, at: t0 + 50, reloads: [reload('change', 0, 100)], unreachableAttempts: 0 })).toEqual({ cause: 'reload', reloadReason: 'added a.example.com' });
    const drift = reload('repair-drift', 0, 100, 'repaired: proxy config differed from the routes in place');
    expect(attributeDrop({ openedAt: t0 - 600_000, at: t0 + 900, reloads: [drift], unreachableAttempts: 3 })).toEqual({ cause: 'reload', reloadReason: drift.reason });
  });

  it('a change long before or after the drop is not its cause', () => {
    expect(attributeDrop({ openedAt: t0 - 600_000, at: t0 + 5_000, reloads: [reload('change', 0, 100)], unreachableAttempts: 0 }).cause).toBe('unexplained');
    expect(attributeDrop({ openedAt: t0 - 600_000, at: t0 - 5_000, reloads: [reload('change', 0, 100)], unreachableAttempts: 0 }).cause).toBe('unexplained');
  });

  it('an empty Caddy repaired (or a new one created) after the drop: proxy-restarted, even when it was unreachable meanwhile', () => {
    expect(attributeDrop({ openedAt: t0 - 600_000, at: t0, reloads: [reload('repair-empty', 3_000, 3_100)], unreachableAttempts: 12 })).toEqual({ cause: 'proxy-restarted', reloadReason: null });
    expect(attributeDrop({ openedAt: t0 - 600_000, at: t0, reloads: [reload('initial', 3_000, 3_100)], unreachableAttempts: 0 }).cause).toBe('proxy-restarted');
    // A repair before the drop, or before the dropped connection even opened, explains nothing.
    expect(attributeDrop({ openedAt: t0 - 600_000, at: t0 + 500, reloads: [reload('initial', 0, 100)], unreachableAttempts: 0 }).cause).toBe('unexplained');
    expect(attributeDrop({ openedAt: t0 + 200, at: t0 + 300, reloads: [reload('change', 0, 100)], unreachableAttempts: 0 }).cause).toBe('unexplained');
    expect(attributeDrop({ openedAt: t0 - 600_000, at: t0 + 60_000, reloads: [reload('repair-empty', 0, 100)], unreachableAttempts: 0 }).cause).toBe('unexplained');
  });

  it('nothing answering while the canary tried to come back, and no reload: proxy-unreachable; else unexplained', () => {
    expect(attributeDrop({ openedAt: t0 - 600_000, at: t0, reloads: [], unreachableAttempts: 2 }).cause).toBe('proxy-unreachable');
    expect(attributeDrop({ openedAt: t0 - 600_000, at: t0, reloads: [], unreachableAttempts: 0 })).toEqual({ cause: 'unexplained', reloadReason: null });
  });
});
