import { isDatabaseUnavailable, type DbHealth } from './db-faults.js';

// A read that can answer from memory while the database cannot: the last
// result that came from the database, kept for dashboards that must keep
// working during an outage (GET /v1/sessions, GET /v1/status). Live parts of
// those answers (sessions, frame ages) come from the connected map anyway;
// only the database rows are as old as `readAt` says. Any other error, or no
// earlier result, is thrown as it is (503 DATABASE_UNAVAILABLE for an outage).

export interface ReadResult<T> {
  data: T;
  /** Null: read from the database now. Else: when the remembered result was read. */
  fromMemoryAt: Date | null;
}

export class LastGoodRead<T> {
  private last: { data: T; at: Date } | undefined;

  constructor(
    private readonly query: () => Promise<T>,
    /** Skips the database while it is recently known down (no full deadline per read). */
    private readonly health?: DbHealth,
  ) {}

  async read(): Promise<ReadResult<T>> {
    if (this.last && this.health?.recentlyDown) return { data: this.last.data, fromMemoryAt: this.last.at };
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
