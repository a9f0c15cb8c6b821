import type { Tx } from '../db/database.js';
import { finishManagedDrains, markReportsDrain } from '../db/managed-drains.js';
import { prismaSql } from '../db/sql.js';
import type { EvaluationPlan } from '../scheduling/evaluation.js';

// How an evaluation's plan is written (scheduler-loop.ts), on the transaction
// the scheduler lease fenced by its epoch: every statement carries the epoch,
// and nothing here talks to an agent.

const OPEN: ('pending' | 'delivered')[] = ['pending', 'delivered'];

/** Writes a plan on the fenced transaction: allocations first (placed, stopped, moved, removed), then deployments. */
export async function writePlan(tx: Tx, plan: EvaluationPlan, epoch: number): Promise<void> {
  const sql = prismaSql(tx);
  if (plan.insert.length > 0) {
    await sql.run(
      `INSERT INTO allocations (id, service_id, node_id, release_id, desired, cause, epoch, replaces)
      SELECT id, service_id, node_id, release_id, 'run', cause, $6::bigint, replaces
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $7::text[]) AS v(id, service_id, node_id, release_id, cause, replaces)`,
      [plan.insert.map((r) => r.id), plan.insert.map((r) => r.serviceId), plan.insert.map((r) => r.nodeId), plan.insert.map((r) => r.releaseId), plan.insert.map((r) => r.cause), epoch, plan.insert.map((r) => r.replaces ?? null)],
    );
  }
  if (plan.stop.length > 0) {
    await sql.run(`UPDATE allocations SET desired = 'stop', epoch = $2::bigint WHERE id = ANY($1::text[]) AND desired = 'run'`, [plan.stop.map((s) => s.allocationId), epoch]);
  }
  for (const move of plan.moves) {
    await sql.run(`UPDATE allocations SET release_id = $2, epoch = $3::bigint WHERE id = ANY($1::text[]) AND desired = 'run'`, [move.allocationIds, move.releaseId, epoch]);
  }
  if (plan.homes.length > 0) {
    // A service without a home gets its first replica's node (only while it has none), and its deployments with it.
    const ids = plan.homes.map((h) => h.serviceId);
    const nodes = plan.homes.map((h) => h.nodeId);
    await sql.run(`UPDATE services s SET node_id = v.node_id FROM unnest($1::text[], $2::text[]) AS v(id, node_id) WHERE s.id = v.id AND s.node_id IS NULL`, [ids, nodes]);
    await sql.run(`UPDATE deployments d SET node_id = s.node_id FROM services s WHERE s.id = ANY($1::text[]) AND d.service_id = s.id AND d.node_id IS NULL`, [ids]);
  }
  if (plan.pendingWrites.length > 0) {
    await sql.run(`UPDATE services s SET pending = v.pending FROM unnest($1::text[], $2::jsonb[]) AS v(id, pending) WHERE s.id = v.id`, [
      plan.pendingWrites.map((w) => w.serviceId),
      plan.pendingWrites.map((w) => (w.pending === null ? null : JSON.stringify(w.pending))),
    ]);
  }
  if (plan.remove.length > 0) {
    await sql.run(`DELETE FROM allocations WHERE id = ANY($1::text[]) AND desired = 'stop' AND status->>'state' = 'removed'`, [plan.remove]);
  }
  const now = new Date();
  const ranNow: string[] = [];
  for (const d of plan.deployments) {
    switch (d.kind) {
      case 'progress':
        await tx.deployment.updateMany({ where: { id: d.id, status: { in: OPEN } }, data: { reason: d.reason } });
        break;
      case 'running': {
        const done = await tx.deployment.updateMany({
          where: { id: d.id, status: { in: OPEN } },
          data: { status: 'running', reason: d.reason, finishedAt: now, runningAt: now, ...(d.imageRef ? { imageRef: d.imageRef } : {}) },
        });
        if (done.count > 0) {
          await tx.deployment.updateMany({ where: { serviceId: d.serviceId, status: 'running', id: { not: d.id } }, data: { status: 'superseded', reason: `replaced by deployment ${d.id}` } });
          // Its drain (allocations.drained of its nodes): whether it is reported; its sums once every report is in.
          await markReportsDrain(sql, d.id);
          ranNow.push(d.id);
        }
        break;
      }
      case 'failed':
        await tx.deployment.updateMany({ where: { id: d.id, status: { in: OPEN } }, data: { status: 'failed', reason: d.reason, finishedAt: now } });
        break;
      case 'superseded':
        await tx.deployment.updateMany({ where: { id: d.id, status: { in: OPEN } }, data: { status: 'superseded', reason: d.reason, finishedAt: now } });
        break;
    }
  }
  // Last: it takes the lock that orders it with the reports' check (db/managed-drains.ts).
  await finishManagedDrains(sql, ranNow);
}

