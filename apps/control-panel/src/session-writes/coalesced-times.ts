import type { KeyedSerialQueue, Logger } from '@tether/common';
import { isPermanentDatabaseError } from '../db/db-faults.js';
import type { FactWriter } from './facts.js';

// The outbox's droppable lane (outbox.ts): the newest last-seen time per node
// and last-used time per token, coalesced in memory and written in one
// statement each. A refused write is merged back (newest wins) and retried by
// the lane; a write that fails for good is dropped, as these times may be.

export interface CoalescedTimesDeps {
  writer: FactWriter;
  /** Writes that update `nodes` rows take turns with the durable lane's (see outbox.ts). */
  nodeRows: KeyedSerialQueue<'nodes'>;
  logger: Logger;
  stats: { droppedTimes: number };
  /** The database refused a write: the outbox records it, spills and backs off. Returns false. */
  refused(err: unknown): false;
  /** Both kinds were written (the lane is no longer refused). */
  recovered(): void;
}

export class CoalescedTimes {
  private lastSeenAt = new Map<string, number>();
  private tokenUsedAt = new Map<string, number>();

  constructor(private readonly deps: CoalescedTimesDeps) {}

  noteLastSeen(nodeId: string, at: number): void {
    if ((this.lastSeenAt.get(nodeId) ?? 0) < at) this.lastSeenAt.set(nodeId, at);
  }

  noteTokenUsed(tokenId: string, at: number): void {
    if ((this.tokenUsedAt.get(tokenId) ?? 0) < at) this.tokenUsedAt.set(tokenId, at);
  }

  get size(): number {
    return this.lastSeenAt.size + this.tokenUsedAt.size;
  }

  /** Forgets every pending time; returns how many. */
  dropAll(): number {
    const dropped = this.size;
    this.lastSeenAt = new Map();
    this.tokenUsedAt = new Map();
    return dropped;
  }

  /** Writes last-seen, then token last-used times. False: the database is unavailable. */
  async attempt(): Promise<boolean> {
    if (this.lastSeenAt.size > 0) {
      const ok = await this.deps.nodeRows.run('nodes', () => {
        // Taken only now: times noted while waiting for the turn go in this write too.
        const taken = this.lastSeenAt;
        this.lastSeenAt = new Map();
        return this.write(taken, this.lastSeenAt, 'last-seen', (times) => this.deps.writer.lastSeen(times));
      });
      if (!ok) return false;
    }
    if (this.tokenUsedAt.size > 0) {
      const taken = this.tokenUsedAt;
      this.tokenUsedAt = new Map();
      const ok = await this.write(taken, this.tokenUsedAt, 'token last-used', (times) => this.deps.writer.tokensUsed(times));
      if (!ok) return false;
    }
    this.deps.recovered();
    return true;
  }

  /**
   * Writes times taken from the pending map. Refused: merged back into `pending`
   * (newest wins) and false. Failed otherwise: dropped.
   */
  private async write(taken: Map<string, number>, pending: Map<string, number>, what: string, write: (times: ReadonlyMap<string, number>) => Promise<void>): Promise<boolean> {
    try {
      // The map itself, epoch ms: the writer sends its keys and values as they are (fact-writer.ts).
      await write(taken);
      return true;
    } catch (err) {
      if (!isPermanentDatabaseError(err)) {
        for (const [id, t] of taken) if ((pending.get(id) ?? 0) < t) pending.set(id, t);
        return this.deps.refused(err);
      }
      this.deps.stats.droppedTimes += taken.size;
      this.deps.logger.error({ err, count: taken.size }, `${what} times could not be written and were dropped`);
      return true;
    }
  }
}
