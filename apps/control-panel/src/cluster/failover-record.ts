import type { Tx } from '../db/database.js';
import { prismaSql } from '../db/sql.js';
import { auditRow, insertAuditRows, type AuditContext } from '../audit/audit-entry.js';
import type { EvaluationPlan } from '../scheduling/evaluation.js';
import type { NodeFacts } from '../scheduling/managed.js';

// What failover leaves behind for status and history (issue 38), written in the scheduler's fenced transaction
// that places the replacements: on each replacement allocation, the lost replica it took the place of as the
// scheduler saw it then (`moved_from`: the node, since when it had no live session, why its last session was torn
// down), so the answer "moved from node-a (unreachable since …, torn down for …) to node-c at …" is read from a row
// that outlives the stopped one; and one audit row per re-placed replica, actor `scheduler`.

/** `allocations.moved_from` of a replacement (status/replica-status.ts reads it). */
export interface MovedFrom {
  allocationId: string;
  nodeId: string;
  nodeName: string;
  /** ISO time; null when the node's going down was never recorded. */
  unreachableSince: string | null;
  teardownReason: string | null;
}

const SCHEDULER_ACTOR: AuditContext = { actor: { tokenId: null, name: 'scheduler', kind: 'scheduler' }, teamId: null, requestId: null, sourceAddress: null };

/**
 * Records the plan's re-placements of lost replicas: their `moved_from`, and an audit row each (action
 * `service.failover`, target the service, its team's, code `NODE_LOST`).
 */
export async function recordFailover(tx: Tx, plan: EvaluationPlan, nodes: readonly NodeFacts[]): Promise<void> {
  const replaced = plan.insert.filter((row) => row.cause === 'node-lost');
  if (replaced.length === 0) return;
  const sql = prismaSql(tx);
  const fromNode = new Map(plan.stop.map((s) => [s.allocationId, s.nodeId]));
  const nodeIds = [...new Set([...fromNode.values()])];
  const reasons = new Map(
    (await sql.rows<{ id: string; reason: string | null }>(`SELECT id, last_teardown_reason AS reason FROM nodes WHERE id = ANY($1::text[])`, [nodeIds])).map((r) => [r.id, r.reason]),
  );
  const facts = new Map(nodes.map((n) => [n.id, n]));
  const moves = replaced.flatMap((row) => {
    const nodeId = row.replaces !== undefined ? fromNode.get(row.replaces) : undefined;
    if (row.replaces === undefined || nodeId === undefined) return [];
    const node = facts.get(nodeId);
    const since = node?.downSince ?? null;
    const from: MovedFrom = {
      allocationId: row.replaces,
      nodeId,
      nodeName: node?.name ?? nodeId,
      unreachableSince: since === null ? null : new Date(Math.round(since)).toISOString(),
      teardownReason: reasons.get(nodeId) ?? null,
    };
    return [{ id: row.id, from }];
  });
  if (moves.length > 0) {
    await sql.run(`UPDATE allocations a SET moved_from = v.moved_from FROM unnest($1::text[], $2::jsonb[]) AS v(id, moved_from) WHERE a.id = v.id`, [
      moves.map((m) => m.id),
      moves.map((m) => JSON.stringify(m.from)),
    ]);
  }
  const teams = await sql.rows<{ id: string; team_id: string }>(`SELECT id, team_id FROM services WHERE id = ANY($1::text[])`, [[...new Set(replaced.map((r) => r.serviceId))]]);
  const teamOf = new Map(teams.map((t) => [t.id, t.team_id]));
  await insertAuditRows(
    tx,
    replaced.map((row) => auditRow(SCHEDULER_ACTOR, { action: 'service.failover', targetType: 'service', targetId: row.serviceId, teamId: teamOf.get(row.serviceId) ?? null }, 'success', 'NODE_LOST')),
  );
}
