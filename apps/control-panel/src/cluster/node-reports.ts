import type { Logger } from '@tether/common';
import type { ContainerState, RoutingStatus, RuntimeStatus } from '@tether/protocol';
import { sqlOf, type Db } from '../db/database.js';
import type { RemoteReport } from '../sessions/remote-report.js';
import type { AgentSession } from '../sessions/session.js';

export type { RemoteReport };

// Shared truth between panels: the owner of a node's session writes a report
// row (state, containers, runtime, routing) when it changes, at most once a
// second for all changed nodes in one statement, fenced by the session's
// generation. Other panels answer status from these rows, and only while the
// owner's lease is live (PostgreSQL's now()) and the row's generation is the
// node's current one: never a stale "running". An unchanged row is refreshed
// (for its frame age) only while another panel is live: alone, nobody reads it. No signal follows a write:
// readers read the rows when asked (and at each lease renewal), so a NOTIFY
// per flush cost every panel a parse and the writer a round trip for nothing.


/** How soon a session opened or closed is written (batched with whatever else changed meanwhile). */
const URGENT_MS = 50;

interface Pending {
  nodeId: string;
  sessionId: string;
  generation: number;
  state: 'connected' | 'closed';
  lastFrameAt: number;
  report: unknown;
}

/** A written report's identity: the session's report objects are kept while their content is unchanged (report.ts). */
interface Written {
  sessionId: string;
  containers: unknown;
  runtime: unknown;
  routing: unknown;
  lastFrameAt: number;
}

export class NodeReportWriter {
  private readonly dirty = new Map<string, Pending>();
  private readonly written = new Map<string, Written>();
  private timer: NodeJS.Timeout | undefined;
  private timerDue = 0;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly options: {
      prisma: Db;
      panelId: string;
      flushMs: number;
      /** Re-write an unchanged connected report this often, so other panels' frame ages stay near. */
      refreshMs: number;
      /**
       * Whether another panel's lease was live at the last renewal. Alone, nobody reads the frame ages, so
       * unchanged reports are not re-written (10,000 sessions: 1,000 rows a second for nothing); once
       * another panel is live, each session's next frame re-writes its row.
       */
      othersLive: () => boolean;
      generationOf: (sessionId: string) => number | undefined;
      logger: Logger;
    },
  ) {}

  /** The session's current state, written if it changed since the last write. */
  observe(session: AgentSession, state: 'connected' | 'closed'): void {
    const generation = this.options.generationOf(session.id);
    if (generation === undefined) return;
    const r = session.report;
    const last = this.written.get(session.nodeId);
    if (
      state === 'connected' &&
      last &&
      last.sessionId === session.id &&
      r &&
      last.containers === r.containers &&
      last.runtime === r.runtime &&
      last.routing === r.routing &&
      (session.lastFrameAt - last.lastFrameAt < this.options.refreshMs || !this.options.othersLive())
    ) {
      return;
    }
    // A new session or a closed one is news other panels must not wait a full window for; content changes are.
    const urgent = state === 'closed' || last?.sessionId !== session.id;
    this.written.set(session.nodeId, { sessionId: session.id, containers: r?.containers, runtime: r?.runtime, routing: r?.routing, lastFrameAt: session.lastFrameAt });
    if (state === 'closed') this.written.delete(session.nodeId);
    this.dirty.set(session.nodeId, {
      nodeId: session.nodeId,
      sessionId: session.id,
      generation,
      state,
      lastFrameAt: session.lastFrameAt,
      report: {
        containers: r?.containers ?? [],
        runtime: r?.runtime ?? null,
        routing: r?.routing ?? null,
        heartbeats: session.heartbeats,
        missedAcks: session.missedAcks,
        agentVersion: session.agentVersion,
        peer: session.peer,
        openedAt: session.openedAt,
      },
    });
    this.schedule(urgent);
  }

  /** One flush per window (all dirty nodes, one statement); an urgent change shortens the wait to URGENT_MS. */
  private schedule(urgent = false): void {
    const delay = urgent ? Math.min(URGENT_MS, this.options.flushMs) : this.options.flushMs;
    if (this.timer && this.timerDue <= Date.now() + delay) return;
    clearTimeout(this.timer);
    this.timerDue = Date.now() + delay;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flushing = this.flushing.then(() => this.flush());
    }, delay);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.flushing;
    await this.flush();
  }

  private async flush(): Promise<void> {
    if (this.dirty.size === 0) return;
    const rows = [...this.dirty.values()];
    this.dirty.clear();
    const json = JSON.stringify(
      rows.map((r) => ({
        node_id: r.nodeId,
        session_id: r.sessionId,
        generation: r.generation,
        state: r.state,
        last_frame_at: new Date(r.lastFrameAt).toISOString(),
        report: r.report,
      })),
    );
    try {
      await sqlOf(this.options.prisma).run(
        `INSERT INTO node_reports (node_id, panel_id, session_id, generation, state, last_frame_at, report, updated_at)
        SELECT r.node_id, $1::text, r.session_id, r.generation, r.state, r.last_frame_at, r.report, now()
        FROM jsonb_to_recordset($2::jsonb) AS r(node_id text, session_id text, generation bigint, state text, last_frame_at timestamptz, report jsonb)
        WHERE EXISTS (SELECT 1 FROM node_owners w WHERE w.node_id = r.node_id AND w.generation = r.generation)
        ON CONFLICT (node_id) DO UPDATE SET panel_id = EXCLUDED.panel_id, session_id = EXCLUDED.session_id,
          generation = EXCLUDED.generation, state = EXCLUDED.state, last_frame_at = EXCLUDED.last_frame_at,
          report = EXCLUDED.report, updated_at = now()
        WHERE node_reports.generation <= EXCLUDED.generation`,
        [this.options.panelId, json],
      );
    } catch (err) {
      // Put back what is not newer already; the next change (or the refresh) retries.
      for (const r of rows) if (!this.dirty.has(r.nodeId)) this.dirty.set(r.nodeId, r);
      for (const r of rows) this.written.delete(r.nodeId);
      this.options.logger.warn({ err, rows: rows.length }, 'node reports not written');
      this.schedule();
    }
  }
}

interface ReportRow {
  node_id: string;
  panel_id: string;
  session_id: string;
  /** int8: a string from node-postgres, a bigint from Prisma's raw fallback. */
  generation: bigint | string;
  state: string;
  last_frame_at: Date;
  updated_at: Date;
  /** Null where the read left it out (readReportsChanged: the reader's own rows). */
  report: {
    containers?: ContainerState[];
    runtime?: RuntimeStatus | null;
    routing?: RoutingStatus | null;
    peer?: string;
    agentVersion?: string;
    openedAt?: number;
    heartbeats?: number;
    missedAcks?: number;
  } | null;
  live: boolean;
  internal_url: string | null;
}

/**
 * Report rows written at or after `since` (all when null), with the database's time of the read. Rows of
 * `selfId` come without their content (`report` null): the panel holds those sessions and knows them, and
 * during a reconnect storm reading its own thousands of fresh rows back cost it a second of CPU.
 */
export async function readReportsChanged(prisma: Db, since: Date | null, selfId: string): Promise<{ reports: RemoteReport[]; readAt: Date }> {
  const rows = await sqlOf(prisma).rows<ReportRow & { read_at: Date }>(
    `SELECT r.node_id, r.panel_id, r.session_id, r.generation, r.state, r.last_frame_at, r.updated_at,
      CASE WHEN r.panel_id = $2 THEN NULL ELSE r.report END AS report, false AS live, NULL::text AS internal_url, now() AS read_at
    FROM node_reports r WHERE $1::timestamptz IS NULL OR r.updated_at >= $1::timestamptz`,
    [since, selfId],
  );
  const readAt = rows[0]?.read_at ?? since ?? new Date(0);
  return { reports: rows.map(toReport), readAt };
}

const REPORTS_WITH_LIVENESS = `SELECT r.*, (p.lease_until > now() AND w.generation = r.generation) AS live, p.internal_url
  FROM node_reports r LEFT JOIN panels p ON p.id = r.panel_id LEFT JOIN node_owners w ON w.node_id = r.node_id`;

/** Reports of these nodes (all when `nodeIds` is undefined), with whether each is live evidence. */
export async function readReports(prisma: Db, nodeIds: readonly string[] | undefined): Promise<Map<string, RemoteReport>> {
  const sql = sqlOf(prisma);
  const rows = nodeIds
    ? await sql.rows<ReportRow>(`${REPORTS_WITH_LIVENESS} WHERE r.node_id = ANY($1::text[])`, [nodeIds])
    : await sql.rows<ReportRow>(REPORTS_WITH_LIVENESS);
  const out = new Map<string, RemoteReport>();
  for (const r of rows) out.set(r.node_id, toReport(r));
  return out;
}

function toReport(r: ReportRow): RemoteReport {
  const report = r.report ?? {};
  return {
    nodeId: r.node_id,
    panelId: r.panel_id,
    sessionId: r.session_id,
    generation: Number(r.generation),
    state: r.state === 'connected' ? 'connected' : 'closed',
    lastFrameAt: r.last_frame_at.getTime(),
    updatedAt: r.updated_at.getTime(),
    containers: report.containers ?? [],
    runtime: report.runtime ?? null,
    routing: report.routing ?? null,
    extra: {
      peer: report.peer ?? null,
      agentVersion: report.agentVersion ?? null,
      openedAt: report.openedAt ?? null,
      heartbeats: report.heartbeats ?? 0,
      missedAcks: report.missedAcks ?? 0,
    },
    live: r.live === true,
    internalUrl: r.internal_url,
    source: 'report-row',
  };
}
