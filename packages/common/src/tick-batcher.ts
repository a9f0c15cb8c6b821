/**
 * Coalesces lookups into few calls of `loadMany` (one query instead of one
 * per caller). A reconnect storm opens hundreds of sessions a second and each
 * asked the database alone. Keys asked in the same turn of the loop go in one
 * batch; while `maxInFlight` batches are loading, new keys wait and join the
 * next one, so the busier the database, the larger the batches (and an idle
 * panel adds no delay). Keys asked twice in a batch are loaded once; a batch
 * holds at most `maxBatch` keys.
 *
 * `lingerMs` (default 0): a key asked within lingerMs of the last batch waits
 * lingerMs for others to join. A storm's opens arrive one every few ms, not in
 * the same turn, so without it batches averaged about two keys and every open
 * still cost a query per read (most of a storm's CPU went to query writes and
 * Prisma's per-query work, see docs/benchmarks.md); a lone key after a quiet
 * spell is still loaded at once.
 */
export class TickBatcher<K, V> {
  private pending = new Map<K, { resolve: (v: V | undefined) => void; reject: (err: unknown) => void }[]>();
  private scheduled = false;
  private inFlight = 0;
  /** When the last batch was started (performance.now()); -Infinity: never. */
  private lastFlushAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly loadMany: (keys: K[]) => Promise<ReadonlyMap<K, V>>,
    private readonly maxBatch = 1_000,
    private readonly maxInFlight = 2,
    private readonly lingerMs = 0,
  ) {}

  /** Resolves with what `loadMany` found for the key (undefined: nothing), or rejects with its error. */
  load(key: K): Promise<V | undefined> {
    return new Promise((resolve, reject) => {
      const waiters = this.pending.get(key);
      if (waiters) waiters.push({ resolve, reject });
      else this.pending.set(key, [{ resolve, reject }]);
      if (!this.scheduled) {
        this.scheduled = true;
        const run = () => {
          this.scheduled = false;
          this.flush();
        };
        // Busy (a batch started within lingerMs): wait for more keys. Else setImmediate: after the I/O
        // callbacks of this poll phase, so every caller in it joins.
        if (this.lingerMs > 0 && performance.now() - this.lastFlushAt < this.lingerMs) setTimeout(run, this.lingerMs);
        else setImmediate(run);
      }
    });
  }

  private flush(): void {
    while (this.pending.size > 0 && this.inFlight < this.maxInFlight) {
      const batch = new Map<K, { resolve: (v: V | undefined) => void; reject: (err: unknown) => void }[]>();
      for (const [key, waiters] of this.pending) {
        if (batch.size >= this.maxBatch) break;
        batch.set(key, waiters);
      }
      for (const key of batch.keys()) this.pending.delete(key);
      this.inFlight++;
      this.lastFlushAt = performance.now();
      let loading: Promise<ReadonlyMap<K, V>>;
      try {
        loading = this.loadMany([...batch.keys()]);
      } catch (err) {
        loading = Promise.reject(err);
      }
      loading
        .then(
          (found) => {
            for (const [key, waiters] of batch) for (const w of waiters) w.resolve(found.get(key));
          },
          (err: unknown) => {
            for (const waiters of batch.values()) for (const w of waiters) w.reject(err);
          },
        )
        .finally(() => {
          this.inFlight--;
          // Keys that arrived while this batch loaded.
          this.flush();
        });
    }
  }
}
