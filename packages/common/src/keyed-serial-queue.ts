/**
 * One lane per key: work for the same key runs one after another, work for
 * different keys runs side by side (a long rollout of one service never holds
 * up a restart of another; a slow push to one node never delays another).
 *
 * A task's failure is its caller's alone: `run` rejects with it, and the next
 * task of the lane runs as if it had succeeded. A key with no work left holds
 * no memory, so a queue keyed by session or node never grows.
 */
export class KeyedSerialQueue<K = string> {
  private readonly lanes = new Map<K, { tail: Promise<void>; pending: number }>();

  run<T>(key: K, work: () => T | Promise<T>): Promise<T> {
    const lane = this.lanes.get(key) ?? { tail: Promise.resolve(), pending: 0 };
    lane.pending++;
    const result = lane.tail.then(work);
    lane.tail = result.then(
      () => this.release(key),
      () => this.release(key),
    );
    this.lanes.set(key, lane);
    return result;
  }

  /** Whether the key has work queued or running. */
  busy(key: K): boolean {
    return this.pending(key) > 0;
  }

  /** Tasks queued or running for the key. */
  pending(key: K): number {
    return this.lanes.get(key)?.pending ?? 0;
  }

  /** Keys with work queued or running. */
  get size(): number {
    return this.lanes.size;
  }

  /** Resolves when every lane has run out of work, including work queued while waiting. */
  async idle(): Promise<void> {
    while (this.lanes.size > 0) await Promise.all([...this.lanes.values()].map((lane) => lane.tail));
  }

  private release(key: K): void {
    const lane = this.lanes.get(key);
    if (!lane) return;
    lane.pending--;
    if (lane.pending === 0) this.lanes.delete(key);
  }
}
