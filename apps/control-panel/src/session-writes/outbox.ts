import { KeyedSerialQueue, type Logger } from '@tether/common';
import { isDatabaseUnavailable, isPermanentDatabaseError } from '../db/db-faults.js';
import type { DurableFact, FactResult, FactWriter } from './facts.js';
import { CoalescedTimes } from './coalesced-times.js';
import { Lane } from './outbox-lane.js';
import { OutboxSpill } from './outbox-spill.js';
import type { SpillFile } from './spill-file.js';

// The one ordered, batched write path for session facts (shared/DESIGN.md).
// Durable facts (session opens and closes, deployment transitions, reloads)
// form one FIFO, so every node's facts keep their order; they are written in
// batches of one transaction each, retried with backoff for as long as the
// database refuses them, and never dropped: from the first refusal on they are
// also appended to the spill file, which a restarted panel replays in order.
// Last-seen and token last-used times are coalesced (one newest time per node
// or token) and are the only thing dropped when the queue outgrows its limit.
// The two kinds are written in two lanes, each with its own write in flight,
// backoff and refusals: durable facts do not wait behind a times write (a
// last-seen flush of a few thousand nodes takes 8-55 ms under load, and a
// deployment transition submitted meanwhile used to wait it out: part of the
// dispatch tail, docs/benchmarks.md, issue 10), nor times behind a batch of
// durable facts. What the lanes may not do at once is write the same
// `nodes` rows: a last-seen UPDATE and a batch of session opens, closes or an
// orphan sweep each lock many node rows in an order of their own plan, and two
// such statements at once can deadlock (40P01 after PostgreSQL's 1 s
// deadlock_timeout, retried here as an unexpected error). So those take turns
// (`nodeRows`, first come first served); deployment transitions and reloads
// touch no node row (a reload's foreign key takes KEY SHARE, which a last-seen
// UPDATE does not conflict with) and never wait. Between the lanes there is no
// order to keep: every write of `nodes.last_seen_at` (last-seen flush, session
// open, session close) only moves it forward (GREATEST / `<` guard), so any
// interleaving ends at the newest time; the one durable fact that reads it,
// the orphan sweep, closes sessions of a run that is over (a previous run of
// this panel, or a panel whose lease expired) at their node's last-seen time,
// clamped before the node's next open: a time this run's lane still holds for
// that node belongs to a later session, so it is clamped away either way.
// A fact the database refuses for good (a constraint, a deleted node) is
// isolated, logged and rejected, so it cannot block the rest; any other error
// is retried like an outage, since dropping a fact would lose a history row.

export interface OutboxOptions {
  writer: FactWriter;
  /** Where refused durable facts go; none: memory only (tests of the queue alone). */
  spill?: SpillFile | undefined;
  logger: Logger;
  /** First retry delay; doubles up to retryMaxMs. */
  retryMinMs?: number;
  retryMaxMs: number;
  /** Pending entries above which droppable times are dropped. */
  maxPending: number;
  /** Durable facts per transaction. */
  batchSize?: number;
}

interface Entry {
  seq: number;
  fact: DurableFact;
  /** performance.now() at submit (none: replayed from the spill file). */
  submittedAt?: number;
  resolve(result: FactResult): void;
  reject(err: unknown): void;
}

export interface OutboxStats {
  committed: number;
  failedAttempts: number;
  spilled: number;
  replayed: number;
  droppedTimes: number;
  rejected: number;
}

export class SessionFactOutbox {
  private readonly queue: Entry[] = [];
  private readonly coalesced: CoalescedTimes;
  private nextSeq = 1;
  private readonly spill: OutboxSpill;
  private stopped = false;
  private readonly retryMinMs: number;
  private readonly batchSize: number;
  /** Durable facts, in order. */
  private readonly durable: Lane;
  /** Coalesced last-seen and token last-used times. */
  private readonly times: Lane;
  /** Writes that touch `nodes` rows take turns, first come first served (see the header): one key. */
  private readonly nodeRows = new KeyedSerialQueue<'nodes'>();
  readonly stats: OutboxStats = { committed: 0, failedAttempts: 0, spilled: 0, replayed: 0, droppedTimes: 0, rejected: 0 };
  /** Told of every submitted fact that committed: its kind and ms from submit to commit (outbox-metrics.ts). */
  onCommitted: ((kind: DurableFact['kind'], waitedMs: number) => void) | undefined;

  constructor(private readonly options: OutboxOptions) {
    this.retryMinMs = options.retryMinMs ?? 100;
    // A storm tick of opens is one statement per batch (session-event-batch.ts): batches large enough to take a tick.
    this.batchSize = options.batchSize ?? 1_000;
    this.spill = new OutboxSpill(options.spill, options.logger);
    const lane = {
      stopped: () => this.stopped,
      retryDelay: (previousMs: number) => {
        this.stats.failedAttempts++;
        return previousMs ? Math.min(previousMs * 2, this.options.retryMaxMs) : this.retryMinMs;
      },
    };
    this.durable = new Lane({
      ...lane,
      hasWork: () => this.queue.length > 0,
      attempt: () => this.attemptDurable(),
      drained: () => this.removeSpillWhenEmpty(),
    });
    this.coalesced = new CoalescedTimes({
      writer: options.writer,
      nodeRows: this.nodeRows,
      logger: options.logger,
      stats: this.stats,
      refused: (err) => this.refused(this.times, err),
      recovered: () => this.recovered(this.times),
    });
    this.times = new Lane({ ...lane, hasWork: () => this.coalesced.size > 0, attempt: () => this.coalesced.attempt() });
  }

  /** Loads what a previous run spilled, ahead of anything new, and starts writing. Returns how many facts it replays. */
  start(): number {
    const replayed = this.spill.replay();
    for (const { seq, fact } of replayed) {
      this.queue.push({ seq, fact, resolve: () => {}, reject: () => {} });
      this.nextSeq = Math.max(this.nextSeq, seq + 1);
    }
    this.stats.replayed += replayed.length;
    this.durable.kick();
    this.times.kick();
    return replayed.length;
  }

  /** Queues a durable fact; resolves when it has committed (it may wait out an outage). */
  submit(fact: DurableFact): Promise<FactResult> {
    return new Promise<FactResult>((resolve, reject) => {
      const entry: Entry = { seq: this.nextSeq++, fact, submittedAt: performance.now(), resolve, reject };
      this.queue.push(entry);
      // While the database refuses writes, a new fact goes to the file at once: a crash now must not lose it.
      // So does one that arrives after stop(): nothing writes it any more, the next start will.
      if (this.isDegraded || this.stopped) this.spillPending();
      this.durable.kick();
    });
  }

  /** A node's newest last-seen time (coalesced; droppable). */
  noteLastSeen(nodeId: string, at: Date): void {
    this.coalesced.noteLastSeen(nodeId, at.getTime());
    this.limitMemory();
    this.times.kick();
  }

  /** A token's newest use (coalesced; droppable). */
  noteTokenUsed(tokenId: string, at: Date): void {
    this.coalesced.noteTokenUsed(tokenId, at.getTime());
    this.limitMemory();
    this.times.kick();
  }

  get pending(): number {
    return this.queue.length + this.coalesced.size;
  }

  /** The database refused the last attempt of either lane. */
  get isDegraded(): boolean {
    return this.durable.refused || this.times.refused;
  }

  /** Writes everything pending now in both lanes (no backoff wait). False when the database refused. */
  async flush(): Promise<boolean> {
    const [durable, times] = await Promise.all([this.durable.flush(), this.times.flush()]);
    return durable && times;
  }

  /**
   * Stops writing: one last attempt of both lanes within `deadlineMs`, then
   * whatever is still pending and durable goes to the spill file for the next run.
   */
  async stop(deadlineMs: number): Promise<void> {
    this.stopped = true;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, deadlineMs)));
    await Promise.race([this.flush().catch(() => false), deadline]);
    clearTimeout(timer);
    if (this.queue.length > 0) {
      this.spillPending();
      this.options.logger.warn({ facts: this.queue.length, file: this.spill.file }, 'stopping with session facts the database did not take; they are in the spill file');
    }
  }

  /** One batch of durable facts. False: the database is unavailable. */
  private async attemptDurable(): Promise<boolean> {
    let batch = this.queue.slice(0, this.batchSize);
    if (this.nodeRows.busy('nodes')) {
      // A last-seen write is in flight: the facts ahead of the first that writes node rows go now, the rest after it.
      const first = batch.findIndex((e) => writesNodeRows(e.fact));
      if (first > 0) batch = batch.slice(0, first);
    }
    const write = () => this.writeDurable(batch);
    return batch.some((e) => writesNodeRows(e.fact)) ? this.nodeRows.run('nodes', write) : write();
  }

  private async writeDurable(batch: Entry[]): Promise<boolean> {
    try {
      const results = await this.options.writer.apply(batch.map((e) => e.fact));
      this.committed(batch, results);
      return true;
    } catch (err) {
      if (!isPermanentDatabaseError(err)) return this.refused(this.durable, err);
      return this.isolate(batch);
    }
  }

  private committed(batch: Entry[], results: FactResult[]): void {
    // Only the durable lane removes entries, one attempt at a time, so the batch is still the head of the queue.
    this.queue.splice(0, batch.length);
    this.stats.committed += batch.length;
    // Before the facts' promises resolve: whoever awaited them finds the file gone when nothing else is queued.
    this.removeSpillWhenEmpty();
    const now = performance.now();
    batch.forEach((e, i) => {
      if (e.submittedAt !== undefined) this.onCommitted?.(e.fact.kind, now - e.submittedAt);
      e.resolve(results[i]);
    });
    this.recovered(this.durable);
  }

  /** A batch failed for another reason than the database: find the fact at fault, one by one. */
  private async isolate(batch: Entry[]): Promise<boolean> {
    for (const entry of batch) {
      try {
        const [result] = await this.options.writer.apply([entry.fact]);
        this.committed([entry], [result]);
      } catch (err) {
        if (!isPermanentDatabaseError(err)) return this.refused(this.durable, err);
        this.queue.shift();
        this.stats.rejected++;
        this.options.logger.error({ err, fact: entry.fact }, 'session fact could not be written and was discarded');
        entry.reject(err);
      }
    }
    return true;
  }

  private refused(lane: Lane, err: unknown): false {
    if (!isDatabaseUnavailable(err)) {
      // Not an outage and not a constraint: most likely a bug. Kept and retried all the same, and said loudly.
      this.options.logger.error({ err, pending: this.pending }, 'session facts could not be written (unexpected error); held and retried');
    } else if (!this.isDegraded) {
      this.options.logger.warn(
        { err, pending: this.pending, file: this.spill.file },
        'database unavailable: session facts are held, spilled to the outbox file and retried',
      );
    }
    lane.refused = true;
    this.spillPending();
    return false;
  }

  private recovered(lane: Lane): void {
    if (!lane.refused) return;
    lane.refused = false;
    if (!this.isDegraded) this.options.logger.info({ pending: this.pending }, 'database takes session facts again');
  }

  private removeSpillWhenEmpty(): void {
    if (this.queue.length === 0) this.spill.drained();
  }

  /** Appends every durable fact not yet in the spill file. */
  private spillPending(): void {
    this.stats.spilled += this.spill.appendPending(this.queue);
  }

  private limitMemory(): void {
    if (this.pending <= this.options.maxPending) return;
    const dropped = this.coalesced.dropAll();
    if (dropped === 0) return;
    this.stats.droppedTimes += dropped;
    this.options.logger.warn({ dropped, pending: this.pending }, 'outbox over its limit: dropped last-seen and token last-used times');
  }
}

/** Durable facts whose write updates `nodes` rows (session-event-batch.ts, closeOrphans in fact-writer.ts). */
const writesNodeRows = (fact: DurableFact): boolean => fact.kind === 'session.opened' || fact.kind === 'session.closed' || fact.kind === 'sessions.orphaned';
