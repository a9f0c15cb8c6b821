import type { Logger } from '@tether/common';
import type { DurableFact } from './facts.js';
import type { SpillFile, SpilledFact } from './spill-file.js';

// The outbox's side of its spill file: which queued facts are already in the
// file (by sequence number), what a previous run left there to replay, and
// when the file can go. None (no file): memory only, every call does nothing.

export class OutboxSpill {
  /** Highest sequence number already in the file. */
  #through = 0;
  #hasEntries = false;

  constructor(
    private readonly spill: SpillFile | undefined,
    private readonly logger: Logger,
  ) {}

  get file(): string | undefined {
    return this.spill?.file;
  }

  /** What a previous run spilled, once each and in sequence order; those facts count as already in the file. */
  replay(): SpilledFact[] {
    const spill = this.spill;
    if (!spill) return [];
    const { entries, skipped } = spill.read();
    if (skipped > 0) this.logger.warn({ skipped, file: spill.file }, 'outbox spill file had unreadable lines (a torn last write); skipped');
    const seen = new Set<number>();
    const ordered = entries.filter((e) => !seen.has(e.seq) && seen.add(e.seq)).sort((a, b) => a.seq - b.seq);
    for (const { seq } of ordered) this.#through = Math.max(this.#through, seq);
    this.#hasEntries = ordered.length > 0;
    if (ordered.length > 0) this.logger.info({ facts: ordered.length, file: spill.file }, 'replaying session facts a previous run spilled');
    return ordered;
  }

  /** Appends every queued fact not yet in the file; returns how many. */
  appendPending(queue: readonly { seq: number; fact: DurableFact }[]): number {
    const spill = this.spill;
    if (!spill) return 0;
    const fresh: SpilledFact[] = [];
    for (const e of queue) {
      // Closing orphaned sessions is redone at every start; it need not survive one.
      if (e.seq > this.#through && e.fact.kind !== 'sessions.orphaned') fresh.push({ seq: e.seq, fact: e.fact });
    }
    if (fresh.length === 0) return 0;
    try {
      spill.append(fresh);
      this.#through = Math.max(this.#through, fresh[fresh.length - 1]!.seq);
      this.#hasEntries = true;
      return fresh.length;
    } catch (err) {
      // Still in memory and retried; only a crash now would lose them.
      this.logger.error({ err, file: spill.file }, 'could not append to the outbox spill file');
      return 0;
    }
  }

  /** Every fact in the file has committed (or was discarded for good): the file goes. */
  drained(): void {
    if (!this.#hasEntries) return;
    this.spill?.remove();
    this.#hasEntries = false;
  }
}
