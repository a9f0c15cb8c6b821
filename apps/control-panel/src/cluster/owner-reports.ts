import type { Logger } from '@tether/common';
import { withLiveReport } from '../sessions/live-report.js';
import type { RemoteReport } from '../sessions/remote-report.js';
import type { PeerClient } from './peer-client.js';

// Status and session health on a panel that does not hold a node's session:
// the owner's report row says who holds it, whether that panel's lease is live
// and what the node ran at the last change; the owner itself, asked over its
// internal URL, says how old the last frame is right now. One request per
// owning panel per read, all its nodes batched, bounded by the peer timeout.
// An owner that does not answer leaves the row as the evidence (source
// `report-row`, the owner named); a row whose owner's lease expired was never
// live evidence (node-reports.ts), so the node reads unknown, never a stale
// "running".

/** After an owner failed to answer, reads for this long answer from its rows without asking it again (no timeout per read). */
const FAILED_OWNER_QUIET_MS = 1_000;

export class OwnerReports {
  private readonly failedUntil = new Map<string, number>();

  constructor(
    private readonly client: PeerClient,
    private readonly selfId: string,
    private readonly logger: Logger,
  ) {}

  /** The rows, with every live one of another panel replaced by that panel's answer when it gave one. */
  async overlay(rows: ReadonlyMap<string, RemoteReport>, containers: boolean): Promise<Map<string, RemoteReport>> {
    const out = new Map(rows);
    const byOwner = new Map<string, RemoteReport[]>();
    for (const r of rows.values()) {
      if (!r.live || r.state !== 'connected' || r.panelId === this.selfId) continue;
      const list = byOwner.get(r.panelId);
      if (list) list.push(r);
      else byOwner.set(r.panelId, [r]);
    }
    await Promise.all([...byOwner].map(([panelId, list]) => this.ask(panelId, list, containers, out)));
    return out;
  }

  private async ask(panelId: string, rows: RemoteReport[], containers: boolean, out: Map<string, RemoteReport>): Promise<void> {
    if ((this.failedUntil.get(panelId) ?? 0) > performance.now()) return;
    const sentAt = Date.now();

    try {
      const answer = await this.client.liveReports({ panelId, internalUrl: rows[0]!.internalUrl }, rows.map((r) => r.nodeId), containers);
      this.failedUntil.delete(panelId);
      const live = new Map(answer.reports.map((r) => [r.nodeId, r]));
      for (const row of rows) {
        const report = live.get(row.nodeId);
        // The owner no longer holds that session (closed, or superseded since the row): not live evidence.
        if (!report || report.generation < row.generation) out.set(row.nodeId, { ...row, live: false, source: 'owner' });
        else out.set(row.nodeId, withLiveReport(row, report, sentAt));
      }
    } catch (err) {
      this.failedUntil.set(panelId, performance.now() + FAILED_OWNER_QUIET_MS);
      this.logger.warn({ err, panelId, nodes: rows.length }, "owning panel did not answer: its nodes' evidence is its report rows");
    }
  }
}
