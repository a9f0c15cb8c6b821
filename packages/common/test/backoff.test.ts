import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Backoff, RETRY_HINT_HORIZON_MS, backoffCeiling, backoffDelay } from '../src/index.js';

describe('Backoff', () => {
  it('grows the bound exponentially to the cap, with full jitter below it', () => {
    const b = new Backoff({ initialMs: 100, maxMs: 1000, random: () => 0.999999 });
    const delays = Array.from({ length: 6 }, () => b.next());
    expect(delays).toEqual([99, 199, 399, 799, 999, 999]);
    const low = new Backoff({ initialMs: 100, maxMs: 1000, random: () => 0 });
    expect(low.next()).toBe(0);
  });

  it('reset starts again from the first bound', () => {
    const b = new Backoff({ initialMs: 100, maxMs: 10_000, random: () => 0.5 });
    b.next();
    b.next();
    b.next();
    b.reset();
    expect(b.ceiling()).toBe(100);
    expect(b.attempts).toBe(0);
  });
});

describe('backoffDelay', () => {
  it('without jitter is exactly the bound: predictable restarts and cooldowns', () => {
    const options = { initialMs: 1_000, maxMs: 8_000, jitter: 0, random: () => 0 };
    expect([0, 1, 2, 3, 4, 10].map((n) => backoffDelay(n, options))).toEqual([1_000, 2_000, 4_000, 8_000, 8_000, 8_000]);
    expect(backoffDelay(-1, options)).toBe(1_000);
  });

  it('partial jitter stays within [bound·(1-jitter), bound]', () => {
    const options = { initialMs: 1_000, maxMs: 8_000, jitter: 0.25 };
    expect(backoffDelay(1, { ...options, random: () => 0 })).toBe(1_500);
    expect(backoffDelay(1, { ...options, random: () => 0.999999 })).toBe(1_999);
    expect(backoffCeiling(1, options)).toBe(2_000);
  });

  it('honours another growth factor', () => {
    expect(backoffCeiling(2, { initialMs: 10, maxMs: 1_000, factor: 3 })).toBe(90);
  });
});

describe('Backoff.hint (a peer that said when to come back)', () => {
  /** A seeded generator: the schedule must hold for any draw, so many draws are checked. */
  const seeded = (seed: number) => () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);

  /** Drives reconnect attempts on fake timers, like an agent's retry timer: the attempt times from the call. */
  function attemptsUntil(backoff: Backoff, acceptFromMs: number, runForMs = acceptFromMs + 120_000): number[] {
    const times: number[] = [];
    const start = Date.now();
    const attempt = () => {
      times.push(Date.now() - start);
      // Refused: nobody listening yet (the peer is down).
      if (Date.now() - start < acceptFromMs) setTimeout(attempt, backoff.next(true));
    };
    setTimeout(attempt, backoff.next());
    vi.advanceTimersByTime(runForMs);
    return times;
  }

  beforeEach(() => {
    vi.useFakeTimers({ now: 0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('spreads the first attempt over the window, then retries every W/2..W: back within one window of the peer listening', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const b = new Backoff({ initialMs: 500, maxMs: 30_000, random: seeded(seed) });
      for (let i = 0; i < 5; i++) b.next(); // an agent deep in its doubling (bound 16 s)
      b.hint(5_000);
      const listenAt = 14_000; // a panel down 14 s after it closed the sessions
      const times = attemptsUntil(b, listenAt);
      expect(times[0]).toBeGreaterThanOrEqual(0);
      expect(times[0]).toBeLessThan(5_000);
      for (let i = 1; i < times.length; i++) {
        expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(2_500);
        expect(times[i]! - times[i - 1]!).toBeLessThanOrEqual(5_000);
      }
      const back = times.at(-1)!;
      expect(back).toBeGreaterThanOrEqual(listenAt);
      expect(back).toBeLessThanOrEqual(listenAt + 5_000);
    }
  });

  it('a fleet that got the hint arrives spread over the window, not at once', () => {
    const random = seeded(7);
    const firsts = Array.from({ length: 10_000 }, () => {
      const b = new Backoff({ initialMs: 500, maxMs: 30_000, random });
      b.hint(5_000);
      return b.next();
    });
    const perSecond = [0, 0, 0, 0, 0];
    for (const t of firsts) perSecond[Math.floor(t / 1_000)]!++;
    for (const n of perSecond) {
      expect(n).toBeGreaterThan(1_800);
      expect(n).toBeLessThan(2_200);
    }
  });

  it('governs at most the horizon, then grows from the window (never from the first bound), capped', () => {
    const b = new Backoff({ initialMs: 500, maxMs: 30_000, random: () => 0.999999 });
    b.hint(4_000);
    const times = attemptsUntil(b, Infinity, 200_000);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    const hintedGaps = gaps.filter((g) => g <= 4_000);
    // 60 s of hinted delays at ~4 s each, then ordinary bounds 4 s, 8 s, 16 s, 30 s (full jitter at the top of each).
    expect(times.slice(0, hintedGaps.length + 1).at(-1)).toBeLessThanOrEqual(RETRY_HINT_HORIZON_MS + 8_000);
    expect(hintedGaps.length).toBeGreaterThanOrEqual(14);
    expect(gaps.slice(hintedGaps.length, hintedGaps.length + 3)).toEqual([7_999, 15_999, 29_999]);
    expect(b.isHinted).toBe(false);
  });

  it('an attempt that reached a busy peer and failed doubles the window (bounded by the cap); refusals do not', () => {
    const b = new Backoff({ initialMs: 500, maxMs: 20_000, random: () => 0.999999 });
    b.hint(4_000);
    const delays = [b.next(), b.next(true), b.next(false), b.next(true), b.next(false), b.next(false), b.next(false)];
    expect(delays).toEqual([3_999, 3_999, 7_999, 7_999, 15_999, 19_999, 19_999]);
    // 80 s of delays: past the horizon, the ordinary growth takes over.
    expect(b.isHinted).toBe(false);
  });

  it("a busy peer's Retry-After sets the next delay only, within [ms, 2·ms); a hinted window keeps its size after it", () => {
    const b = new Backoff({ initialMs: 500, maxMs: 30_000, random: () => 0.5 });
    b.hint(6_000);
    expect(b.next(true)).toBe(3_000);
    b.retryAfter(1_000);
    expect(b.next(true)).toBe(1_500);
    expect(b.isHinted).toBe(true);
    expect(b.ceiling()).toBe(6_000);
    expect(b.next(true)).toBe(4_500);
    // Without a hint: the next delay is the peer's, then the ordinary growth goes on (one attempt further).
    const plain = new Backoff({ initialMs: 500, maxMs: 30_000, random: () => 0.999999 });
    plain.retryAfter(2_000);
    expect(plain.next()).toBe(3_999);
    expect(plain.next()).toBe(999);
    expect(plain.next()).toBe(1_999);
    // Never past the backoff's cap; forgotten by reset.
    plain.retryAfter(120_000);
    expect(plain.next()).toBe(30_000);
    plain.retryAfter(1_000);
    plain.reset();
    expect(plain.next()).toBe(499);
  });

  it('reset forgets the hint; a window is capped at the backoff cap', () => {
    const b = new Backoff({ initialMs: 500, maxMs: 10_000, random: () => 0.5 });
    b.hint(60_000);
    expect(b.ceiling()).toBe(10_000);
    expect(b.isHinted).toBe(true);
    b.reset();
    expect(b.isHinted).toBe(false);
    expect(b.next()).toBe(250);
  });
});
