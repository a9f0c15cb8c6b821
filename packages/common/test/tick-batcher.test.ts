import { describe, expect, it } from 'vitest';
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
    }, 3);
    const results = await Promise.allSettled([0, 1, 2, 3, 4].map((k) => batcher.load(k)));
    expect(sizes).toEqual([3, 2]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'rejected']);
  });
});
