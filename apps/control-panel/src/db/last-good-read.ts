import type { FastifyBaseLogger } from 'fastify';
import { createLoop, type Loop } from '@tether/common';
import { isDatabaseUnavailable, type DbHealth } from './db-faults.js';

// The panel's outage caches, both here: reads that answer from memory while
// the database cannot, for what must keep working during an outage (session
// health, status, the fleet page, /metrics). Live parts of those answers
// (sessions, frame ages) come from the connected map anyway; only the
// database rows are as old as the last good read.
// - LastGoodRead: read on demand; the last good result when the database is
//   out (GET /v1/sessions, GET /v1/status). Any other error, or no earlier
//   result, is thrown as it is (503 DATABASE_UNAVAILABLE for an outage).
// - refreshedRead: read on a period by a loop; a failed refresh keeps the
//   last read (the node directory, the cached operator tokens).

export interface ReadResult<T> {
  data: T;
  /** Null: read from the database now. Else: when the remembered result was read. */
  fromMemoryAt: Date | null;
}

export class LastGoodRead<T> {
  private last: { data: T; at: Date } | undefined;

  constructor(
    private readonly query: () => Promise<T>,
    /** Skips the database while it is known down (no full deadline per read). */
    private readonly health?: DbHealth,
  ) {}

  private probing = false;

  private probe(): void {
    if (this.probing) return;
    this.probing = true;
    this.query()
      .then((data) => (this.last = { data, at: new Date() }))
      .catch(() => undefined)
      .finally(() => (this.probing = false));
  }

  async read(): Promise<ReadResult<T>> {
    if (this.last && this.health?.knownDown) {
      // Known down: the last good result at once; once per window the database is asked again in the background.
      if (this.health.probeDue) this.probe();
      return { data: this.last.data, fromMemoryAt: this.last.at };
    }
    try {
      const data = await this.query();
      this.last = { data, at: new Date() };
      return { data, fromMemoryAt: null };
    } catch (err) {
      if (this.last && isDatabaseUnavailable(err)) return { data: this.last.data, fromMemoryAt: this.last.at };
      throw err;
    }
  }
}

/** Header that marks an answer whose database rows came from memory, with the time they were read. */
export const FROM_MEMORY_HEADER = 'x-tether-from-memory';

/**
 * A periodic database read whose last good result stays in use while the
 * database fails: the failure is logged once per outage (not once per
 * refresh), and its end once.
 */
export function refreshedRead(options: { name: string; what: string; refreshMs: number; logger: FastifyBaseLogger; read: () => Promise<void> }): Loop {
  let failing = false;
  return createLoop({
    name: options.name,
    intervalMs: options.refreshMs,
    runImmediately: true,
    run: async () => {
      await options.read();
      if (failing) options.logger.info(`${options.what}: the database answers again`);
      failing = false;
    },
    onError: (err) => {
      if (!failing) options.logger.warn({ err }, `${options.what}: refresh failed, keeping the last read`);
      failing = true;
    },
  });
}
