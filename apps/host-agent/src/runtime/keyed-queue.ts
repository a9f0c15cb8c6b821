/**
 * One lane per key (service id): work for the same service runs one after
 * another, work for different services runs side by side. A long rollout of
 * one service never holds up a crash restart of another.
 */
export class KeyedSerialQueue {
  private readonly lanes = new Map<string, { tail: Promise<unknown>; pending: number }>();

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const lane = this.lanes.get(key) ?? { tail: Promise.resolve(), pending: 0 };
    lane.pending++;
    const result = lane.tail.then(work, work);
    lane.tail = result.then(
      () => this.release(key),
      () => this.release(key),
    );
    this.lanes.set(key, lane);
    return result;
  }

  busy(key: string): boolean {
    return (this.lanes.get(key)?.pending ?? 0) > 0;
  }

  /** Resolves when every lane has run out of work. */
  async idle(): Promise<void> {
    while (this.lanes.size > 0) await Promise.all([...this.lanes.values()].map((l) => l.tail));
  }

  private release(key: string): void {
    const lane = this.lanes.get(key);
    if (!lane) return;
    lane.pending--;
    if (lane.pending === 0) this.lanes.delete(key);
  }
}

/** A Map that forgets its oldest entries past `limit`: memory of past deployments stays bounded. */
export class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly limit: number) {
    super();
  }

  override set(key: K, value: V): this {
    if (this.has(key)) this.delete(key);
    super.set(key, value);
    while (this.size > this.limit) this.delete(this.keys().next().value as K);
    return this;
  }
}
