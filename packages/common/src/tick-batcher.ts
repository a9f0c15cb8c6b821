/**
 * Coalesces lookups made in the same turn of the event loop into one call of
 * `loadMany` (one query instead of one per caller). A reconnect storm
 * upgrades hundreds of sockets per poll phase; each asked the database
 * alone. Keys asked twice in a batch are loaded once; a batch never holds
 * more than `maxBatch` keys (the rest go in the next one).
 */
export class TickBatcher<K, V> {
  private pending = new Map<K, { resolve: (v: V | undefined) => void; reject: (err: unknown) => void }[]>();
  private scheduled = false;

  constructor(
    private readonly loadMany: (keys: K[]) => Promise<ReadonlyMap<K, V>>,
    private readonly maxBatch = 1_000,
  ) {}

  /** Resolves with what `loadMany` found for the key (undefined: nothing), or rejects with its error. */
  load(key: K): Promise<V | undefined> {
    return new Promise((resolve, reject) => {
      const waiters = this.pending.get(key);
      if (waiters) waiters.push({ resolve, reject });
      else this.pending.set(key, [{ resolve, reject }]);
      if (this.pending.size >= this.maxBatch) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        // setImmediate: after the I/O callbacks of this poll phase, so every upgrade read in it joins.
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    let loading: Promise<ReadonlyMap<K, V>>;
    try {
      loading = this.loadMany([...batch.keys()]);
    } catch (err) {
      loading = Promise.reject(err);
    }
    loading.then(
      (found) => {
        for (const [key, waiters] of batch) for (const w of waiters) w.resolve(found.get(key));
      },
      (err: unknown) => {
        for (const waiters of batch.values()) for (const w of waiters) w.reject(err);
      },
    );
  }
}
