import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { Logger } from '@tether/common';
import { connectToPrimary, type PrimaryLocator } from '../db/primary-locator.js';

// This panel's lease among the panels sharing one database (issue 10). The
// row is renewed at a third of the lease on a dedicated connection outside
// Prisma's pool, so a pool full of slow queries cannot cost the lease. Other
// panels judge the row by PostgreSQL's now(); this panel counts its lease
// from the moment it *sent* the renewal, on its own monotonic clock, so it
// always believes the lease expired before anyone else does.

/** How often a panel without its lease tries again. */
const RETRY_UNHELD_MS = 250;

export interface PanelLeaseOptions {
  /** The server the pool writes to (db/primary-locator.ts): the lease is renewed there. */
  servers: PrimaryLocator;
  panelId: string;
  internalUrl: string | undefined;
  /** SHA-256 of this run's internal-surface secret (peer-credentials.ts), written with the row. */
  secretHash?: string;
  leaseMs: number;
  connectTimeoutMs: number;
  queryTimeoutMs: number;
  logger: Logger;
}

export interface PanelLeaseEvents {
  /** The lease was proved again after it had lapsed (or for the first time). */
  held: [];
  /** The lease lapsed on this panel's clock; `othersSeen`: another live panel was seen at the last renewal. */
  lost: [{ othersSeen: boolean }];
  /** After every successful renewal (the orphan sweep runs then, while this panel's own lease is certainly valid). */
  renewed: [];
}

export class PanelLease extends EventEmitter<PanelLeaseEvents> {
  private client: pg.Client | undefined;
  /** performance.now() until which the lease is held; 0 = never held. */
  private validUntil = 0;
  private wasHeld = false;
  private timer: NodeJS.Timeout | undefined;
  private expiry: NodeJS.Timeout | undefined;
  private stopped = false;
  private internalUrlNow: string | undefined;
  private running: Promise<void> = Promise.resolve();
  /** Another panel's lease was live at the last successful renewal. */
  othersSeen = false;

  constructor(private readonly options: PanelLeaseOptions) {
    super();
    this.internalUrlNow = options.internalUrl;
  }

  get panelId(): string {
    return this.options.panelId;
  }

  get internalUrl(): string | undefined {
    return this.internalUrlNow;
  }

  /**
   * The internal URL learned once the server listens (none was configured): written at once, not at the next
   * renewal, so other panels can reach this one as soon as it serves.
   */
  setInternalUrl(url: string): void {
    this.internalUrlNow = url;
    if (this.stopped || !this.wasHeld) return;
    clearTimeout(this.timer);
    void this.running.then(() => (this.stopped ? undefined : this.tick()));
  }

  /** The lease is held on this panel's clock. */
  get held(): boolean {
    return performance.now() < this.validUntil;
  }

  /**
   * This panel may answer from its own sessions: it holds its lease, or it saw no other live panel at its
   * last renewal (a lone panel keeps its sessions, and their truth, through a database outage).
   */
  get mayServe(): boolean {
    return this.held || !this.othersSeen;
  }

  /** Renews now (resolves after the first attempt, held or not), then every third of the lease. */
  async start(): Promise<void> {
    this.stopped = false;
    await this.tick();
  }

  /** Stops renewing and gives the lease up, so other panels need not wait for it to expire. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.expiry);
    await this.running;
    const client = this.client;
    this.client = undefined;
    this.validUntil = 0;
    if (!client) return;
    // A millisecond back: lease_until keeps milliseconds and PostgreSQL rounds, so now() could be stored up to half a
    // millisecond ahead and another panel reading in that millisecond would still find this one live (scheduler-lease.ts).
    await client.query("UPDATE panels SET lease_until = now() - interval '1 millisecond' WHERE id = $1", [this.options.panelId]).catch(() => {});
    await client.end().catch(() => {});
  }

  private async tick(): Promise<void> {
    // One renewal chain: a tick asked for early (setInternalUrl) replaces the scheduled one.
    clearTimeout(this.timer);
    const run = this.renew();
    this.running = run;
    await run;
    if (!this.stopped) {
      // Without the lease, retry sooner: a database that returns gives the lease (and readiness) back within a quarter second.
      const every = Math.floor(this.options.leaseMs / 3);
      clearTimeout(this.timer);
      this.timer = setTimeout(() => void this.tick(), Math.max(10, this.held ? every : Math.min(every, RETRY_UNHELD_MS)));
      this.timer.unref();
    }
  }

  private async renew(): Promise<void> {
    const sentAt = performance.now();
    try {
      const client = await this.connection();
      const result = await client.query<{ others: number }>(
        `WITH up AS (
           INSERT INTO panels (id, internal_url, internal_secret_hash, lease_until, renewed_at)
           VALUES ($1, $2, $4, now() + $3 * interval '1 millisecond', now())
           ON CONFLICT (id) DO UPDATE SET internal_url = EXCLUDED.internal_url, internal_secret_hash = EXCLUDED.internal_secret_hash,
             lease_until = EXCLUDED.lease_until, renewed_at = now()
           RETURNING id
         )
         SELECT (SELECT count(*) FROM panels WHERE id <> $1 AND lease_until > now())::int AS others FROM up`,
        [this.options.panelId, this.internalUrlNow ?? null, this.options.leaseMs, this.options.secretHash ?? null],
      );
      if (this.stopped) return;
      this.othersSeen = (result.rows[0]?.others ?? 0) > 0;
      this.validUntil = sentAt + this.options.leaseMs;
      this.armExpiry();
      if (!this.wasHeld) {
        this.wasHeld = true;
        this.options.logger.info({ panelId: this.options.panelId, othersSeen: this.othersSeen }, 'panel lease held');
        this.emit('held');
      }
      this.emit('renewed');
    } catch (err) {
      this.options.logger.warn({ err, panelId: this.options.panelId }, 'panel lease renewal failed');
      // A connection that failed once is not trusted again (it may be stuck behind a frozen server).
      const client = this.client;
      this.client = undefined;
      client?.end().catch(() => {});
      if (!this.held) this.lapse();
    }
  }

  private armExpiry(): void {
    clearTimeout(this.expiry);
    this.expiry = setTimeout(() => this.lapse(), Math.max(0, this.validUntil - performance.now()) + 1);
    this.expiry.unref();
  }

  private lapse(): void {
    if (this.held || !this.wasHeld || this.stopped) return;
    this.wasHeld = false;
    this.options.logger.error({ panelId: this.options.panelId, othersSeen: this.othersSeen }, 'panel lease lost: claiming stopped');
    this.emit('lost', { othersSeen: this.othersSeen });
  }

  private async connection(): Promise<pg.Client> {
    if (this.client) return this.client;
    const client = await connectToPrimary(this.options.servers, (url) => {
      const made = new pg.Client({
        connectionString: url,
        connectionTimeoutMillis: this.options.connectTimeoutMs,
        // Shorter than the lease: a frozen server fails the renewal in time for the next one.
        query_timeout: Math.min(this.options.queryTimeoutMs, Math.floor(this.options.leaseMs / 3)),
        keepAlive: true,
        application_name: `tether-lease-${this.options.panelId}`,
      });
      made.on('error', () => {
        if (this.client === made) this.client = undefined;
        this.options.servers.forget({ url });
      });
      return made;
    });
    this.client = client;
    return client;
  }
}
