import { createLoop, type Logger, type Loop } from '@tether/common';
import { sqlOf, type Db, type Tx } from '../db/database.js';
import { PanelError } from '../errors.js';

// One scheduler among several panels (issue 36), on the node-ownership
// pattern: one row, the panel holding the lease, and an epoch that only grows.
// A panel takes the lease when it is free or expired (by PostgreSQL's clock)
// and then holds the next epoch, above every fencing floor (a promotion that
// lost the last takeover cannot hand out its epoch twice: timeline-fence.ts).
// Every scheduler write runs in a transaction that first locks the lease row
// FOR SHARE under the epoch it was decided with: a panel that lost the lease
// (frozen past it, partitioned) writes nothing, and a takeover waits for a
// write in progress instead of racing it. On its own clock a holder believes
// the lease expired before anyone else can take it (renewed at a third).

export class StaleEpochError extends PanelError<'SCHEDULER_EPOCH_STALE'> {
  constructor(epoch: number) {
    super('SCHEDULER_EPOCH_STALE', `the scheduler lease is no longer held under epoch ${epoch}`);
  }
}

export interface SchedulerLeaseOptions {
  prisma: Db;
  panelId: string;
  leaseMs: number;
  logger: Logger;
}

export class SchedulerLease {
  #epoch = 0;
  /** performance.now() until which this panel holds the lease on its own clock. */
  #validUntil = 0;
  /** What onChange last reported: a lease that ran out on this panel's clock between renewals is still reported lost. */
  #reported: { epoch: number } | null = null;
  readonly #loop: Loop;
  /** Told when this panel starts or stops holding the lease (the scheduler runs only while it does). */
  onChange: ((held: { epoch: number } | null) => void) | undefined;

  constructor(private readonly options: SchedulerLeaseOptions) {
    this.#loop = createLoop({
      name: 'scheduler-lease',
      intervalMs: Math.max(10, Math.floor(options.leaseMs / 3)),
      runImmediately: true,
      run: () => this.renew(),
      onError: (err) => options.logger.warn({ err }, 'scheduler lease renewal failed'),
    });
  }

  /** How long a scheduler write may sit idle inside its transaction before the server ends it (half a lease). */
  get idleLimitMs(): number {
    return Math.max(100, Math.floor(this.options.leaseMs / 2));
  }

  /** The epoch this panel holds the lease under, or null (not held on its own clock). */
  get held(): { epoch: number } | null {
    return performance.now() < this.#validUntil ? { epoch: this.#epoch } : null;
  }

  start(): void {
    this.#loop.start();
  }

  /** Stops renewing and gives the lease up, so another panel need not wait for it to expire. */
  async stop(): Promise<void> {
    await this.#loop.stop();
    const wasHeld = this.held !== null;
    this.#validUntil = 0;
    if (wasHeld) {
      await sqlOf(this.options.prisma)
        // A millisecond back: the column keeps milliseconds and rounds, so now() itself can be stored up to half a
        // millisecond ahead, and a takeover in that millisecond would still find the lease running.
        .rows(`UPDATE scheduler_lease SET lease_until = now() - interval '1 millisecond' WHERE id = 1 AND holder = $1 AND epoch = $2`, [this.options.panelId, this.#epoch])
        .catch(() => {});
    }
    if (this.#reported) {
      this.#reported = null;
      this.onChange?.(null);
    }
  }

  /** One attempt now: renew (same epoch) or take the lease (the next epoch above every floor). */
  async renew(): Promise<void> {
    const sentAt = performance.now();
    let rows: { epoch: string }[] = [];
    try {
      rows = await sqlOf(this.options.prisma).rows<{ epoch: string }>(
        `WITH floor AS (SELECT COALESCE(max(scheduler_epoch), 0) AS floor FROM fencing_floors)
         INSERT INTO scheduler_lease AS l (id, holder, epoch, lease_until, renewed_at)
         SELECT 1, $1::text, floor.floor + 1, now() + $2 * interval '1 millisecond', now() FROM floor
         ON CONFLICT (id) DO UPDATE SET
           epoch = CASE WHEN l.holder = EXCLUDED.holder AND l.epoch = $3::bigint AND l.lease_until > now()
                        THEN GREATEST(l.epoch, EXCLUDED.epoch) ELSE GREATEST(l.epoch + 1, EXCLUDED.epoch) END,
           holder = EXCLUDED.holder, lease_until = EXCLUDED.lease_until, renewed_at = now()
         WHERE l.lease_until <= now() OR (l.holder = EXCLUDED.holder AND l.epoch = $3::bigint)
         RETURNING epoch`,
        [this.options.panelId, this.options.leaseMs, this.#epoch],
      );
    } finally {
      const epoch = rows[0] ? Number(rows[0].epoch) : undefined;
      if (epoch !== undefined) {
        this.#epoch = epoch;
        this.#validUntil = sentAt + this.options.leaseMs;
      } else if (performance.now() >= this.#validUntil) this.#validUntil = 0;
      const before = this.#reported;
      const after = this.held;
      if ((before === null) !== (after === null) || (before && after && before.epoch !== after.epoch)) {
        this.#reported = after;
        if (after) this.options.logger.info({ epoch: after.epoch }, 'scheduler lease held');
        else if (before) this.options.logger.warn({ epoch: before.epoch }, 'scheduler lease lost');
        this.onChange?.(after);
      }
    }
  }

  /**
   * Runs `write` in one transaction that holds the lease row under `epoch` FOR SHARE: it commits only while
   * this panel holds the lease under that epoch (by the database's clock); otherwise StaleEpochError and
   * nothing of `write` is kept.
   */
  async write<T>(epoch: number, write: (tx: Tx) => Promise<T>): Promise<T> {
    return this.options.prisma.$transaction(async (tx) => {
      // The row lock below would outlive a holder frozen mid-write (SIGSTOP, a stalled VM): nothing on the server
      // ends an idle transaction, and every takeover waits on the lock. The server ends it after half a lease.
      await tx.$queryRaw`SELECT set_config('idle_in_transaction_session_timeout', ${String(this.idleLimitMs)}, true)`;
      // statement_timestamp(), not now(): the lease must still run when the lock is taken, not when the transaction began.
      const held = await tx.$queryRaw<{ epoch: bigint }[]>`
        SELECT epoch FROM scheduler_lease WHERE id = 1 AND holder = ${this.options.panelId} AND epoch = ${epoch} AND lease_until > statement_timestamp() FOR SHARE`;
      if (held.length === 0) throw new StaleEpochError(epoch);
      return write(tx);
    });
  }
}
