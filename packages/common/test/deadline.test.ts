import { describe, expect, it } from 'vitest';
import { Deadline, type DeadlineClock } from '../src/deadline.js';

/** A manual clock whose timers fire `earlyMs` before their interval, as Node's do off its cached loop clock. */
function earlyClock(earlyMs: number) {
  let now = 1_000;
  let seq = 0;
  const timers = new Map<number, { at: number; ms: number; fn: () => void }>();
  const clock: DeadlineClock = {
    now: () => now,
    setTimer(fn, ms) {
      const id = ++seq;
      timers.set(id, { at: now + ms - earlyMs, ms, fn });
      return {
        id,
        refresh: () => {
          const t = timers.get(id);
          if (t) t.at = now + t.ms - earlyMs;
        },
      };
    },
    clearTimer: (timer) => void timers.delete((timer as unknown as { id: number }).id),
  };
  const advance = (ms: number, step = 0.25) => {
    const end = now + ms;
    while (now < end) {
      now = Math.min(end, now + step);
      for (const [id, t] of [...timers]) {
        if (t.at <= now) {
          timers.delete(id);
          t.fn();
        }
      }
    }
  };
  return { clock, advance, armed: () => timers.size, now: () => now };
}

describe('Deadline', () => {
  it('never expires before the whole timeout passed, though its timer fires 1 ms early', () => {
    const c = earlyClock(1);
    const fired: number[] = [];
    new Deadline({ timeoutMs: 3_000, clock: c.clock, onExpire: (e) => fired.push(e) });
    c.advance(2_999.75);
    expect(fired).toEqual([]);
    c.advance(1.25);
    expect(fired).toHaveLength(1);
    expect(fired[0]).toBeGreaterThanOrEqual(3_000);
    expect(fired[0]).toBeLessThan(3_001.5);
  });

  it('counts from the last touch, also after an early fire re-armed it for the remainder', () => {
    const c = earlyClock(1);
    const fired: number[] = [];
    const d = new Deadline({ timeoutMs: 1_000, clock: c.clock, onExpire: (e) => fired.push(e) });
    c.advance(999.5); // timer fired early at 999 and re-armed for the remaining millisecond
    d.touch();
    c.advance(999.5);
    expect(fired).toEqual([]);
    c.advance(1);
    expect(fired).toHaveLength(1);
    expect(fired[0]).toBeGreaterThanOrEqual(1_000);
    expect(fired[0]).toBeLessThan(1_001.5);
  });

  it('expires once, and not at all after cancel', () => {
    const c = earlyClock(0);
    let count = 0;
    const d = new Deadline({ timeoutMs: 100, clock: c.clock, onExpire: () => count++ });
    c.advance(500);
    d.touch();
    c.advance(500);
    expect(count).toBe(1);
    expect(d.finished).toBe(true);
    const e = new Deadline({ timeoutMs: 100, clock: c.clock, onExpire: () => count++ });
    e.cancel();
    c.advance(500);
    expect(count).toBe(1);
    expect(c.armed()).toBe(0);
  });

  it('on the system clock, fires within a few milliseconds after the timeout, never before', async () => {
    const started = performance.now();
    const elapsed = await new Promise<number>((resolve) => new Deadline({ timeoutMs: 50, onExpire: resolve }));
    const wall = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(50);
    expect(wall).toBeGreaterThanOrEqual(50);
    expect(wall).toBeLessThan(500);
  });
});
