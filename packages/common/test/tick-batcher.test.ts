import { afterEach, describe, expect, it, vi } from 'vitest';
import { TickBatcher } from '../src/tick-batcher.js';

describe('TickBatcher', () => {
  it('loads the keys asked in one turn with one call, each key once, and answers every caller', async () => {
    const calls: string[][] = [];
    const batcher = new TickBatcher<string, number>(async (keys) => {
      calls.push(keys);
      return new Map(keys.filter((k) => k !== 'missing').map((k) => [k, k.length]));
    });
    const answers = await Promise.all(['a', 'bb', 'a', 'missing'].map((k) => batcher.load(k)));
    expect(answers).toEqual([1, 2, 1, undefined]);
    expect(calls).toEqual([['a', 'bb', 'missing']]);
    // A later turn is a new batch.
    expect(await batcher.load('ccc')).toBe(3);
    expect(calls).toHaveLength(2);
  });

  it('splits at maxBatch and rejects every caller of a failed batch', async () => {
    const sizes: number[] = [];
    const batcher = new TickBatcher<number, number>(async (keys) => {
      sizes.push(keys.length);
      if (keys.includes(4)) throw new Error('down');
      return new Map(keys.map((k) => [k, k]));
    }, 3, 5);
    const results = await Promise.allSettled([0, 1, 2, 3, 4].map((k) => batcher.load(k)));
    expect(sizes).toEqual([3, 2]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'rejected']);
  });

  it('while a batch loads, keys asked in later turns wait and go together in the next one', async () => {
    const calls: number[][] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const batcher = new TickBatcher<number, number>(
      async (keys) => {
        calls.push(keys);
        if (calls.length === 1) await gate;
        return new Map(keys.map((k) => [k, k * 10]));
      },
      100,
      1,
    );
    const first = batcher.load(1);
    await new Promise((r) => setImmediate(r));
    // Three more turns of the loop while the first batch is still loading.
    const later: Promise<number | undefined>[] = [];
    for (const k of [2, 3, 4]) {
      later.push(batcher.load(k));
      await new Promise((r) => setImmediate(r));
    }
    expect(calls).toEqual([[1]]);
    release();
    expect(await first).toBe(10);
    expect(await Promise.all(later)).toEqual([20, 30, 40]);
    expect(calls).toEqual([[1], [2, 3, 4]]);
  });

  describe('lingerMs', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it('a lone key goes at once; keys arriving one by one soon after a batch wait lingerMs and go together', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'setImmediate', 'performance'] });
      const calls: number[][] = [];
      const batcher = new TickBatcher<number, number>(async (keys) => {
        calls.push(keys);
        return new Map(keys.map((k) => [k, k]));
      }, 1_000, 2, 20);
      const first = batcher.load(1);
      await vi.advanceTimersByTimeAsync(0);
      expect(calls).toEqual([[1]]);
      expect(await first).toBe(1);
      // A storm: one key every 3 ms, each in its own turn of the loop.
      const storm: Promise<number | undefined>[] = [];
      for (let k = 2; k <= 8; k++) {
        storm.push(batcher.load(k));
        await vi.advanceTimersByTimeAsync(3);
      }
      await vi.advanceTimersByTimeAsync(50);
      expect(await Promise.all(storm)).toEqual([2, 3, 4, 5, 6, 7, 8]);
      expect(calls.length).toBeLessThanOrEqual(3);
      expect(calls.slice(1).flat()).toEqual([2, 3, 4, 5, 6, 7, 8]);
      // After a quiet spell a lone key goes at once again.
      await vi.advanceTimersByTimeAsync(100);
      const lone = batcher.load(9);
      await vi.advanceTimersByTimeAsync(0);
      expect(calls.at(-1)).toEqual([9]);
      expect(await lone).toBe(9);
    });
  });
});
