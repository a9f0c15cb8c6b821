import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLoop } from '../src/index.js';

describe('createLoop', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('runs every interval, not before', async () => {
    let runs = 0;
    const loop = createLoop({ name: 't', intervalMs: 1000, run: () => void runs++ });
    loop.start();
    await vi.advanceTimersByTimeAsync(999);
    expect(runs).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs).toBe(1);
    await vi.advanceTimersByTimeAsync(3000);
    expect(runs).toBe(4);
    await loop.stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect(runs).toBe(4);
  });

  it('reports errors and keeps going', async () => {
    const errors: unknown[] = [];
    let runs = 0;
    const loop = createLoop({
      name: 'boom',
      intervalMs: 100,
      run: () => {
        runs++;
        throw new Error('nope');
      },
      onError: (e, name) => errors.push([name, (e as Error).message]),
    });
    loop.start();
    await vi.advanceTimersByTimeAsync(300);
    expect(runs).toBe(3);
    expect(errors).toEqual([['boom', 'nope'], ['boom', 'nope'], ['boom', 'nope']]);
    await loop.stop();
  });

  it('never overlaps a slow run, and stop waits for it', async () => {
    let active = 0;
    let maxActive = 0;
    let finished = 0;
    const loop = createLoop({
      name: 'slow',
      intervalMs: 10,
      run: async () => {
        active++;
        maxActive = Math.max(maxActive, active);
        await new Promise((r) => setTimeout(r, 50));
        active--;
        finished++;
      },
    });
    loop.start();
    await vi.advanceTimersByTimeAsync(35);
    void loop.trigger();
    const stopped = loop.stop();
    await vi.advanceTimersByTimeAsync(100);
    await stopped;
    expect(maxActive).toBe(1);
    expect(active).toBe(0);
    expect(finished).toBe(1);
  });

  it('jitter spreads ticks within ± ratio', async () => {
    const times: number[] = [];
    const loop = createLoop({ name: 'j', intervalMs: 1000, jitterRatio: 0.5, random: () => 0, run: () => void times.push(Date.now()) });
    const t0 = Date.now();
    loop.start();
    await vi.advanceTimersByTimeAsync(499);
    expect(times).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(times).toEqual([t0 + 500]);
    await loop.stop();
  });

  it('trigger runs at once and restarts the interval', async () => {
    let runs = 0;
    const loop = createLoop({ name: 'tr', intervalMs: 1000, run: () => void runs++ });
    loop.start();
    await vi.advanceTimersByTimeAsync(900);
    await loop.trigger();
    expect(runs).toBe(1);
    await vi.advanceTimersByTimeAsync(900);
    expect(runs).toBe(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(runs).toBe(2);
    await loop.stop();
  });
});
