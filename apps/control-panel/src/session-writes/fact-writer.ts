import { insertAuditRows } from '../audit/audit-entry.js';
import { sqlOf, type Db, type Tx } from '../db/database.js';
import { finishManagedDrains, recordAllocationDrain } from '../db/managed-drains.js';
import { prismaSql, type Sql } from '../db/sql.js';
import type { DurableFact, FactResult, FactWriter } from './facts.js';
import { applySessionFacts, isSessionFact, sessionWaves, type SessionFact } from './session-event-batch.js';

// The SQL behind the session-fact outbox. Every durable fact is idempotent:
// session events are keyed by (session_id, kind) and reloads by their fact
// key (ON CONFLICT DO NOTHING), and the node row is only touched when the
// event row was really inserted, so a retried write that had committed changes
// nothing. Deployment transitions only move forward from the states they
// name. A batch is one transaction.

/** Statuses a deployment can still leave. */
const OPEN_STATUSES = ['pending', 'delivered'] as const;

export class PrismaFactWriter implements FactWriter {
  constructor(
    private readonly prisma: Db,
    /** Interactive transaction bounds (the pool's limits): a frozen database fails the batch instead of holding it. */
    private readonly txOptions: { maxWait: number; timeout: number },
  ) {}

  async apply(facts: readonly DurableFact[]): Promise<FactResult[]> {
    if (facts.length === 0) return [];
    // Only session opens and closes, each node once (a storm tick): one statement, atomic by itself, with no
    // BEGIN and COMMIT round trips around it.
    if (facts.every(isSessionFact) && sessionWaves(facts).length === 1) {
      await applySessionFacts(sqlOf(this.prisma), facts);
      return facts.map(() => undefined);
    }
    // One deploy's step alone (the usual batch while deploys come one by one; its 202 waits for dispatched and
    // delivered, and for whatever batch is in flight): one statement, no BEGIN and COMMIT, no Prisma client cost.
    if (facts.length === 1 && isDeploymentStep(facts[0]!)) return [await applyDeploymentStep(sqlOf(this.prisma), facts[0])];
    // A node's allocation statuses alone: one statement too.
    if (facts.length === 1 && facts[0]!.kind === 'allocations.status') return [await applyAllocationStatus(sqlOf(this.prisma), facts[0])];
    return this.prisma.$transaction(async (tx) => {
      const results: FactResult[] = [];
      for (let i = 0; i < facts.length; ) {
        // A run of consecutive session opens and closes goes out as one statement per wave (session-event-batch.ts).
        let end = i;
        while (end < facts.length && isSessionFact(facts[end]!)) end++;
        if (end > i) {
          await applySessionFacts(prismaSql(tx), facts.slice(i, end) as SessionFact[]);
          for (; i < end; i++) results.push(undefined);
          continue;
        }
        results.push(await applyFact(tx, facts[i]!));
        i++;
      }
      // Last in the transaction: it takes the lock that orders it with the scheduler's check (db/managed-drains.ts).
      await finishManagedDrains(prismaSql(tx), [...new Set(facts.flatMap((f) => (f.kind === 'allocation.drained' ? [f.deploymentId] : [])))]);
      return results;
    }, this.txOptions);
  }

  async lastSeen(times: ReadonlyMap<string, number>): Promise<void> {
    if (times.size === 0) return;
    await sqlOf(this.prisma).run(
      `UPDATE nodes SET last_seen_at = v.at FROM (${TIMES_FROM_JSON}) AS v
      WHERE nodes.id = v.id AND (nodes.last_seen_at IS NULL OR nodes.last_seen_at < v.at)`,
      timesAsJson(times),
    );
  }

  async tokensUsed(times: ReadonlyMap<string, number>): Promise<void> {
    if (times.size === 0) return;
    await sqlOf(this.prisma).run(
      `UPDATE api_tokens SET last_used_at = v.at FROM (${TIMES_FROM_JSON}) AS v
      WHERE api_tokens.id = v.id AND (api_tokens.last_used_at IS NULL OR api_tokens.last_used_at < v.at)`,
      timesAsJson(times),
    );
  }
}

/**
 * Ids and times of a coalesced flush as two JSON arrays (ids; epoch milliseconds), zipped by position in
 * SQL. node-postgres turns array parameters into array literals on the main thread, element by element:
 * 31-89 ms for the 10,000 ids and ISO times of one last-seen flush on this 2-core machine, against 3-13 ms
 * for JSON.stringify of the same ids and numbers: a stall every flush for every session's heartbeat p99.
 */
const TIMES_FROM_JSON = `SELECT i.id, 'epoch'::timestamptz + t.ms::bigint * interval '1 millisecond' AS at
  FROM jsonb_array_elements_text($1::jsonb) WITH ORDINALITY AS i(id, n)
  JOIN jsonb_array_elements_text($2::jsonb) WITH ORDINALITY AS t(ms, n) ON t.n = i.n`;

function timesAsJson(times: ReadonlyMap<string, number>): [string, string] {
  return [JSON.stringify([...times.keys()]), JSON.stringify([...times.values()])];
}

async function applyFact(tx: Tx, fact: DurableFact): Promise<FactResult> {
  switch (fact.kind) {
    case 'session.opened':
    case 'session.closed':
      await applySessionFacts(prismaSql(tx), [fact]);
      return undefined;
    case 'sessions.orphaned':
      await closeOrphans(tx, fact.reason, new Date(fact.before), fact.panelId ?? null, fact.expiredOwnersOnly === true);
      return undefined;
    case 'deployment.dispatched':
    case 'deployment.delivered':
    case 'deployment.finished':
    case 'deployment.drained':
      return applyDeploymentStep(prismaSql(tx), fact);
    case 'allocations.status':
      return applyAllocationStatus(prismaSql(tx), fact);
    case 'allocation.drained': {
      // Recorded (or not: a repeat); the deployment's drain is checked at the end of the batch (apply()).
      const { kind: _kind, ...report } = fact;
      return recordAllocationDrain(prismaSql(tx), report);
    }
    case 'reload':
      await tx.$executeRaw`
        INSERT INTO reload_events (node_id, at, hash_before, hash_after, reason, fact_key)
        VALUES (${fact.nodeId}, ${new Date(fact.at)}, ${fact.hashBefore}, ${fact.hashAfter}, ${fact.reason}, ${fact.key})
        ON CONFLICT (fact_key) DO NOTHING`;
      return undefined;
    case 'audit':
      await insertAuditRows(tx, [fact.row]);
      return undefined;
  }
}

type DeploymentStep = Extract<DurableFact, { kind: 'deployment.dispatched' | 'deployment.delivered' | 'deployment.finished' | 'deployment.drained' }>;

const isDeploymentStep = (fact: DurableFact): fact is DeploymentStep =>
  fact.kind === 'deployment.dispatched' || fact.kind === 'deployment.delivered' || fact.kind === 'deployment.finished' || fact.kind === 'deployment.drained';

/**
 * A deployment's step as one statement: sent (on which session, when), ACKed
 * (delivered only from pending), finished (whether the row changed; running
 * supersedes the service's other running deployment in the same statement),
 * drained (the first report for a deployment of the reporting node; whether the row changed).
 * The columns are `timestamp(3)` holding UTC, as Prisma writes them: the ISO
 * time goes in as UTC whatever the session's TimeZone.
 */
async function applyDeploymentStep(sql: Sql, fact: DeploymentStep): Promise<FactResult> {
  switch (fact.kind) {
    case 'deployment.dispatched':
      await sql.run(`UPDATE deployments SET session_id = $2, dispatched_at = $3::timestamptz AT TIME ZONE 'UTC', reports_drain = $4 WHERE id = $1`, [
        fact.deploymentId,
        fact.sessionId,
        fact.at,
        fact.reportsDrain === true,
      ]);
      return undefined;
    case 'deployment.drained': {
      // First one wins (a repeat, a replay after a reconnect: nothing changes); another node's report changes nothing.
      const changed = await sql.run(
        `UPDATE deployments SET connections_open_at_switch = $3, connections_cut = $4, drain_ended_at = $5::timestamptz AT TIME ZONE 'UTC'
        WHERE id = $1 AND node_id = $2 AND drain_ended_at IS NULL`,
        [fact.deploymentId, fact.nodeId, fact.connectionsOpenAtSwitch, fact.connectionsCut, fact.drainEndedAt],
      );
      return changed > 0;
    }
    case 'deployment.delivered':
      await sql.run(
        `UPDATE deployments SET status = 'delivered', acked_at = $2::timestamptz AT TIME ZONE 'UTC', reason = 'acknowledged by the agent' WHERE id = $1 AND status = 'pending'`,
        [fact.deploymentId, fact.at],
      );
      return undefined;
    case 'deployment.finished': {
      // A running deployment can still fail later (its containers crashed past the agent's restart budget).
      const from = fact.status === 'failed' ? [...OPEN_STATUSES, 'running'] : [...OPEN_STATUSES];
      const [row] = await sql.rows<{ changed: number }>(
        `WITH done AS (
          UPDATE deployments SET status = $2::"DeploymentStatus", reason = $3, finished_at = $4::timestamptz AT TIME ZONE 'UTC',
            running_at = CASE WHEN $2::"DeploymentStatus" = 'running' THEN COALESCE(running_at, $4::timestamptz AT TIME ZONE 'UTC') ELSE running_at END,
            image_ref = COALESCE($7::text, image_ref)
          WHERE id = $1 AND status = ANY($5::"DeploymentStatus"[]) AND ($6::text IS NULL OR node_id = $6)
          RETURNING service_id, status
        ), superseded AS (
          UPDATE deployments d SET status = 'superseded', reason = 'replaced by deployment ' || $1
          FROM done WHERE done.status = 'running' AND d.service_id = done.service_id AND d.status = 'running' AND d.id <> $1
        )
        SELECT count(*)::int AS changed FROM done`,
        [fact.deploymentId, fact.status, fact.reason, fact.at, from, fact.nodeId, fact.imageRef ?? null],
      );
      return (row?.changed ?? 0) > 0;
    }
  }
}

/**
 * A node's complete allocations.status as one statement: the reported allocations of that node whose status
 * differs from the row's get it (one UPDATE … FROM the frame's entries, not a statement per row), and its
 * desired=stop allocations the frame no longer lists read `{ state: 'removed' }`; both only while the session's
 * generation is the node's current claim (a stale session after a takeover writes nothing). `status_at` is when
 * the status last changed as recorded; `status_session` the session whose frame last carried it: a new session
 * repeating an unchanged status (a panel restart) moves it, or the replica would read unknown as reported only by
 * an earlier session. True: a row changed.
 */
async function applyAllocationStatus(sql: Sql, fact: Extract<DurableFact, { kind: 'allocations.status' }>): Promise<boolean> {
  const [row] = await sql.rows<{ changed: number }>(
    `WITH v AS (
      SELECT * FROM jsonb_to_recordset($3::jsonb) AS v(id text, service_id text, status jsonb)
    ), fence AS (
      SELECT 1 AS ok WHERE $4::bigint IS NULL
        OR EXISTS (SELECT 1 FROM node_owners w WHERE w.node_id = $1::text AND w.generation = $4::bigint AND w.session_id = $2::text)
    ), reported AS (
      UPDATE allocations a SET status = v.status, status_session = $2::text,
        status_at = CASE WHEN a.status IS DISTINCT FROM v.status THEN $5::timestamptz ELSE a.status_at END
      FROM v, fence
      WHERE a.id = v.id AND a.node_id = $1::text AND a.service_id = v.service_id
        AND (a.status IS DISTINCT FROM v.status OR a.status_session IS DISTINCT FROM $2::text)
      RETURNING a.id
    ), removed AS (
      UPDATE allocations a SET status = '{"state":"removed"}'::jsonb, status_at = $5::timestamptz, status_session = $2::text
      FROM fence
      WHERE a.node_id = $1::text AND a.desired = 'stop' AND a.status IS DISTINCT FROM '{"state":"removed"}'::jsonb
        AND NOT EXISTS (SELECT 1 FROM v WHERE v.id = a.id)
      RETURNING a.id
    )
    SELECT ((SELECT count(*) FROM reported) + (SELECT count(*) FROM removed))::int AS changed`,
    [
      fact.nodeId,
      fact.sessionId,
      JSON.stringify(fact.statuses.map((s) => ({ id: s.allocationId, service_id: s.serviceId, status: s.status }))),
      fact.generation ?? null,
      fact.at,
    ],
  );
  return (row?.changed ?? 0) > 0;
}

/**
 * Closes, in the history, every session opened before `before` that has no
 * close: the run that owned it ended without writing one (SIGKILL, crash,
 * power). It is closed at its node's last-seen time (never before it opened,
 * never after the node's next session opened), and the node row says so when
 * that session was its latest.
 */
async function closeOrphans(tx: Tx, reason: string, before: Date, panelId: string | null, expiredOwnersOnly: boolean): Promise<void> {
  await tx.$executeRaw`
    WITH orphans AS (
      SELECT o.node_id, o.session_id,
        LEAST(
          GREATEST(o.at, n.last_seen_at),
          (SELECT min(x.at) FROM session_events x WHERE x.node_id = o.node_id AND x.kind = 'opened' AND x.at > o.at)
        ) AS closed_at
      FROM session_events o JOIN nodes n ON n.id = o.node_id
      WHERE o.kind = 'opened' AND o.at < ${before}
        AND NOT EXISTS (SELECT 1 FROM session_events c WHERE c.session_id = o.session_id AND c.kind = 'closed')
        -- A session another panel owns under a live lease is not an orphan.
        AND NOT EXISTS (
          SELECT 1 FROM node_owners w JOIN panels p ON p.id = w.panel_id
          WHERE w.session_id = o.session_id AND p.lease_until > now() AND p.id IS DISTINCT FROM ${panelId}::text
        )
        -- The periodic sweep: only sessions whose owner's lease expired.
        AND (NOT ${expiredOwnersOnly}::boolean OR EXISTS (
          SELECT 1 FROM node_owners w LEFT JOIN panels p ON p.id = w.panel_id
          WHERE w.session_id = o.session_id AND (p.lease_until IS NULL OR p.lease_until <= now())
        ))
    ), ins AS (
      INSERT INTO session_events (node_id, session_id, kind, reason, at)
      SELECT node_id, session_id, 'closed'::"SessionEventKind", ${reason}, closed_at FROM orphans
      ON CONFLICT (session_id, kind) DO NOTHING
      RETURNING node_id, at
    ), latest AS (
      SELECT node_id, max(at) AS at FROM ins GROUP BY node_id
    )
    UPDATE nodes SET unreachable_since = latest.at, last_teardown_at = latest.at, last_teardown_reason = ${reason}
    FROM latest
    WHERE nodes.id = latest.node_id
      AND NOT EXISTS (SELECT 1 FROM session_events e WHERE e.node_id = latest.node_id AND e.at > latest.at)`;
}
