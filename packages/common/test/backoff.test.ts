import { describe, expect, it } from 'vitest';
import { Backoff, backoffCeiling, backoffDelay } from '../src/index.js';

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
