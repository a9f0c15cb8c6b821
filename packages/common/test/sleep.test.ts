import { describe, expect, it } from 'vitest';
import { sleep } from '../src/index.js';

describe('sleep', () => {
  it('resolves after the delay, not before and not much after', async () => {
    const started = performance.now();
    await sleep(50);
    const took = performance.now() - started;
    // Timers may fire a fraction of a millisecond early; a loaded machine may be late.
    expect(took).toBeGreaterThanOrEqual(49);
    expect(took).toBeLessThan(1_000);
  });
});
