import type { Logger } from '@tether/common';
import { sqlOf, type Db } from '../db/database.js';
import { readReportsChanged, type RemoteReport } from './node-reports.js';

// What the other live panels hold, as of this panel's last lease renewal
// (cluster.ts reads it again at each one): the nodes whose session another
// panel holds (their per-node metrics are that panel's) and their reports
// (the fleet page's rows).

export class PeerView {
  /** Nodes whose session another live panel holds. */
  private elsewhere: ReadonlySet<string> = new Set();
  /** Every report row read so far (incrementally, at each renewal) and the panels live then. */
  private readonly reportsSeen = new Map<string, RemoteReport>();
  private reportsReadAt: Date | null = null;
  private livePanels: ReadonlySet<string> = new Set();
  /** Another panel's lease was live at this panel's last renewal. */
  othersLive = false;

  constructor(
    private readonly prisma: Db,
    private readonly panelId: string,
    private readonly logger: Logger,
  ) {}

  heldElsewhere(nodeId: string): boolean {
    return this.elsewhere.has(nodeId);
  }

  /** The node's live session on another panel. */
  connectedElsewhere(nodeId: string): RemoteReport | undefined {
    const r = this.reportsSeen.get(nodeId);
    return r && r.state === 'connected' && r.panelId !== this.panelId && this.livePanels.has(r.panelId) ? r : undefined;
  }

  async refresh(): Promise<void> {
    try {
      const sql = sqlOf(this.prisma);
      const live = await sql.rows<{ id: string }>(`SELECT id FROM panels WHERE lease_until > now()`);
      const livePanels = new Set(live.map((p) => p.id));
      // Alone, no node is held elsewhere and no row another panel wrote is live: nothing more to read. The
      // changed rows are then this panel's own (a storm writes 10,000 of them): reading them back cost
      // PostgreSQL 0.9 s per 10,000-agent storm for nothing. The read resumes from the same point once another
      // panel is live, so none of its rows is missed.
      this.othersLive = [...livePanels].some((id) => id !== this.panelId);
      if (this.othersLive) {
        const rows = await sql.rows<{ node_id: string }>(
          `SELECT w.node_id FROM node_owners w JOIN panels p ON p.id = w.panel_id WHERE p.lease_until > now() AND w.panel_id <> $1::text`,
          [this.panelId],
        );
        this.elsewhere = new Set(rows.map((r) => r.node_id));
        // Only rows written since the last read (their time by the database's clock).
        const { reports, readAt } = await readReportsChanged(this.prisma, this.reportsReadAt, this.panelId);
        for (const r of reports) this.reportsSeen.set(r.nodeId, r);
        this.reportsReadAt = readAt;
      } else {
        this.elsewhere = new Set();
      }
      this.livePanels = livePanels;
    } catch (err) {
      this.logger.warn({ err }, 'could not read which nodes other panels hold');
    }
  }
}
