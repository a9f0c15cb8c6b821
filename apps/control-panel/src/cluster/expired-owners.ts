import type { Logger } from '@tether/common';
import { sqlOf, type Db } from '../db/database.js';
import { EXPIRED_OWNER_REASON } from '../session-writes/facts.js';
import type { SessionFactOutbox } from '../session-writes/outbox.js';

/**
 * Closes, in the history, sessions whose owning panel's lease expired (killed, partitioned). cluster.ts runs it
 * after a renewal, so this panel's own lease is certainly live.
 */
export class ExpiredOwnerSweep {
  private sweeping = false;

  constructor(
    private readonly prisma: Db,
    private readonly outbox: SessionFactOutbox,
    private readonly logger: Logger,
  ) {}

  async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      // Cheap reads first: the close is written only when some expired owner left its session open. Two
      // statements, not one anti-join: right after a restart every owner row is the stopped run's (its lease
      // ended) and its closes are all written, and with stale statistics PostgreSQL planned the anti-join as a
      // scan of session_events per owner row: 1.3 s a sweep during a 10,000-agent storm (docs/benchmarks.md).
      const sql = sqlOf(this.prisma);
      const expired = await sql.rows<{ session_id: string }>(
        `SELECT w.session_id FROM node_owners w LEFT JOIN panels p ON p.id = w.panel_id
        WHERE p.lease_until IS NULL OR p.lease_until <= now()`,
      );
      if (expired.length === 0) return;
      const [closed] = await sql.rows<{ n: number }>(`SELECT count(*)::int AS n FROM session_events WHERE session_id = ANY($1::text[]) AND kind = 'closed'`, [
        expired.map((e) => e.session_id),
      ]);
      if ((closed?.n ?? 0) >= expired.length) return;
      await this.outbox.submit({ kind: 'sessions.orphaned', reason: EXPIRED_OWNER_REASON, before: new Date().toISOString(), expiredOwnersOnly: true });
    } catch (err) {
      this.logger.warn({ err }, 'sweep of expired owners failed');
    } finally {
      this.sweeping = false;
    }
  }
}
