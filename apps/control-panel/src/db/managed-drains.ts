import { CAPABILITIES } from '@tether/protocol';
import type { Sql } from './sql.js';

// The drain of a deployment managed by allocations (issue 36, capability `allocations.drain`; docs/api.md "Drain").
// Each node reports the drain of every rollout of the deployment's release it made (`allocations.drained`: the
// allocations moved, the connections open at the switch and cut, when it ended), stored one row per report in
// `deployment_drains`. The deployment's own drain fields are set once, from those rows, when it is *drained*:
//
// - it reached `running` (`running_at` set) and `reports_drain` (every node with a run allocation of it agreed
//   `allocations.drain` when it turned running, markReportsDrain below);
// - every allocation that runs the release now (`desired = 'run'`, `release_id` = the deployment) is named by a
//   report of it, and there is at least one report.
//
// Then `connections_open_at_switch` and `connections_cut` are the sums over its reports (null when any report's is
// null: a proxy that could not count), and `drain_ended_at` the latest report's end. It is checked when a report is
// recorded and when the scheduler ends the deployment `running`; the first result is kept. Both the session-fact
// writer and the scheduler's fenced write call these (db/ is below both).
//
// Those two checks run in two transactions that can overlap (a node's last report and the scheduler's `running`
// write within milliseconds), and each sees only what had committed when its check began: seen once in a CI run,
// where neither saw the other and the drain was never finished. So each check takes one transaction-scoped advisory
// lock, as the last thing its transaction does: the second to take it runs after the first committed and sees both
// writes. Holding it, neither waits for a row the other holds (the scheduler's finish writes only its own locked
// rows; the report's finish writes a row only once the scheduler's write is committed), so it cannot deadlock.
const DRAIN_CHECK_LOCK_KEY = 72707371;

/** What an agent's `allocations.drained` says, and which node and session said it. */
export interface AllocationDrainReport {
  deploymentId: string;
  nodeId: string;
  sessionId: string;
  allocationIds: string[];
  connectionsOpenAtSwitch: number | null;
  connectionsCut: number | null;
  drainEndedAt: string;
}

/**
 * Records one report; true when it was recorded. Ignored: a deployment gone or of a service the node has no
 * allocation of; allocation ids that are another node's (the rest are kept); a report naming an allocation a
 * recorded report of the deployment already names (a repeat, a replay after a reconnect, a 0/0 of a container
 * re-created later: the first report wins).
 */
export async function recordAllocationDrain(sql: Sql, r: AllocationDrainReport): Promise<boolean> {
  const [row] = await sql.rows<{ recorded: number }>(
    `WITH ids AS (
      SELECT array_agg(DISTINCT x ORDER BY x) AS ids FROM unnest($3::text[]) AS x
      WHERE NOT EXISTS (SELECT 1 FROM allocations a WHERE a.id = x AND a.node_id <> $2::text)
    ), ins AS (
      INSERT INTO deployment_drains (deployment_id, node_id, allocation_ids, connections_open_at_switch, connections_cut, drain_ended_at, session_id)
      SELECT d.id, $2::text, ids.ids, $4::int, $5::int, $6::timestamptz AT TIME ZONE 'UTC', $7::text
      FROM deployments d, ids
      WHERE d.id = $1::text AND ids.ids IS NOT NULL
        AND EXISTS (SELECT 1 FROM allocations a WHERE a.service_id = d.service_id AND a.node_id = $2::text)
        AND NOT EXISTS (SELECT 1 FROM deployment_drains x WHERE x.deployment_id = d.id AND x.allocation_ids && ids.ids)
      RETURNING id
    )
    SELECT count(*)::int AS recorded FROM ins`,
    [r.deploymentId, r.nodeId, r.allocationIds, r.connectionsOpenAtSwitch, r.connectionsCut, r.drainEndedAt, r.sessionId],
  );
  return (row?.recorded ?? 0) > 0;
}

/**
 * Sets the drain fields of those of `deploymentIds` that are drained now (see the top of this file); the ids it set.
 * Idempotent: a deployment whose drain is recorded is never written again.
 */
export async function finishManagedDrains(sql: Sql, deploymentIds: readonly string[]): Promise<string[]> {
  if (deploymentIds.length === 0) return [];
  // Call it last in its transaction (see the top of this file).
  await sql.run(`SELECT pg_advisory_xact_lock(${DRAIN_CHECK_LOCK_KEY})`);
  const rows = await sql.rows<{ id: string }>(
    `WITH due AS (
      SELECT d.id FROM deployments d
      WHERE d.id = ANY($1::text[]) AND d.reports_drain AND d.running_at IS NOT NULL AND d.drain_ended_at IS NULL
        AND EXISTS (SELECT 1 FROM deployment_drains r WHERE r.deployment_id = d.id)
        AND NOT EXISTS (
          SELECT 1 FROM allocations a
          WHERE a.release_id = d.id AND a.desired = 'run'
            AND NOT EXISTS (SELECT 1 FROM deployment_drains r WHERE r.deployment_id = d.id AND a.id = ANY(r.allocation_ids))
        )
    ), sums AS (
      SELECT r.deployment_id AS id,
        CASE WHEN bool_or(r.connections_open_at_switch IS NULL) THEN NULL ELSE sum(r.connections_open_at_switch)::int END AS open,
        CASE WHEN bool_or(r.connections_cut IS NULL) THEN NULL ELSE sum(r.connections_cut)::int END AS cut,
        max(r.drain_ended_at) AS ended
      FROM deployment_drains r JOIN due ON due.id = r.deployment_id
      GROUP BY r.deployment_id
    )
    UPDATE deployments d SET connections_open_at_switch = sums.open, connections_cut = sums.cut, drain_ended_at = sums.ended
    FROM sums WHERE d.id = sums.id AND d.drain_ended_at IS NULL
    RETURNING d.id`,
    [deploymentIds],
  );
  return rows.map((r) => r.id);
}

/**
 * At the write that ends a managed deployment `running`: it reports its drain when at least one allocation runs it
 * and every node with a run allocation of it agreed `allocations.drain` at its last session open (`nodes.capabilities`).
 */
export async function markReportsDrain(sql: Sql, deploymentId: string): Promise<void> {
  await sql.run(
    `UPDATE deployments d SET reports_drain = (
      EXISTS (SELECT 1 FROM allocations a WHERE a.release_id = d.id AND a.desired = 'run')
      AND NOT EXISTS (
        SELECT 1 FROM allocations a JOIN nodes n ON n.id = a.node_id
        WHERE a.release_id = d.id AND a.desired = 'run' AND NOT ($2::text = ANY(n.capabilities))
      ))
    WHERE d.id = $1::text`,
    [deploymentId, CAPABILITIES.ALLOCATIONS_DRAIN],
  );
}
