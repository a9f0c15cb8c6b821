import { describe, expect, it } from 'vitest';
import { KeyedSerialQueue } from '../src/index.js';

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('KeyedSerialQueue', () => {
  it('runs one key in order and different keys side by side', async () => {
    const queue = new KeyedSerialQueue();
    const log: string[] = [];
    const gate = deferred();
    const a1 = queue.run('a', async () => {
      log.push('a1 start');
      await gate.promise;
      log.push('a1 end');
    });
    const a2 = queue.run('a', () => void log.push('a2'));
    const b1 = queue.run('b', () => void log.push('b1'));
    await b1;
    // b ran while a1 was still waiting; a2 waits behind a1.
    expect(log).toEqual(['a1 start', 'b1']);
    expect(queue.pending('a')).toBe(2);
    gate.resolve();
    await Promise.all([a1, a2]);
    expect(log).toEqual(['a1 start', 'b1', 'a1 end', 'a2']);
  });

  it('a failed task rejects its own caller only; the lane goes on', async () => {
    const queue = new KeyedSerialQueue();
    const failed = queue.run('a', async () => {
      throw new Error('boom');
    });
    const next = queue.run('a', () => 'after');
    await expect(failed).rejects.toThrow('boom');
    await expect(next).resolves.toBe('after');
    // A synchronous throw is isolated the same way.
    const syncFailed = queue.run('a', () => {
      throw new Error('sync');
    });
    await expect(syncFailed).rejects.toThrow('sync');
    await expect(queue.run('a', () => 1)).resolves.toBe(1);
  });

  it('frees a key once its work is done, and idle waits for work queued meanwhile', async () => {
    const queue = new KeyedSerialQueue<object>();
    const key = {};
    const gate = deferred();
    const first = queue.run(key, () => gate.promise);
    expect(queue.busy(key)).toBe(true);
    expect(queue.size).toBe(1);
    let second = false;
    const idle = queue.idle();
    void first.then(() => queue.run(key, () => void (second = true)));
    gate.resolve();
    await idle;
    expect(second).toBe(true);
    expect(queue.busy(key)).toBe(false);
    expect(queue.size).toBe(0);
  });
});
