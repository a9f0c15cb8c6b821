import { describe, expect, it } from 'vitest';
import { CLOSE_CODES, RETRY_HINT_BOUNDS_MS, formatRetryHint, parseRetryHint } from '../src/index.js';

describe('retry hint in a SERVICE_RESTART close reason', () => {
  it('round-trips, and fits a close reason (at most 123 bytes)', () => {
    const reason = formatRetryHint(6_667);
    expect(reason).toBe('panel shutting down; retry-window-ms=6667');
    expect(parseRetryHint(reason)).toBe(6_667);
    expect(Buffer.byteLength(formatRetryHint(RETRY_HINT_BOUNDS_MS.max, 'x'.repeat(80)))).toBeLessThanOrEqual(123);
    expect(CLOSE_CODES.SERVICE_RESTART).toBe(1012);
  });

  it('clamps what it writes to the bounds, and reads nothing outside them or in other text', () => {
    expect(parseRetryHint(formatRetryHint(1))).toBe(RETRY_HINT_BOUNDS_MS.min);
    expect(parseRetryHint(formatRetryHint(10_000_000))).toBe(RETRY_HINT_BOUNDS_MS.max);
    for (const reason of ['panel shutting down', 'retry-window-ms=99', 'retry-window-ms=300001', 'xretry-window-ms=500', 'retry-window-ms=5e3', 'retry-window-ms=']) {
      expect(parseRetryHint(reason), reason).toBeNull();
    }
    expect(parseRetryHint('retry-window-ms=500')).toBe(500);
    expect(parseRetryHint('a; retry-window-ms=500; b')).toBe(500);
  });
});
