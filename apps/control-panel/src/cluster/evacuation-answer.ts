import type { Db, Tx } from '../db/database.js';
import { prismaSql } from '../db/sql.js';
import { managedSql } from '../db/where-services-run.js';
import { previewEvacuation } from '../scheduling/evaluation.js';
import { readState } from './scheduler-reads.js';

// The answer of POST /v1/nodes/:id/evacuate: what the scheduler will move off
// the node (one at a time) and what refuses, read as an evaluation reads.

export interface EvacuationAnswer {
  moves: { serviceId: string; serviceName: string; allocationId: string; from: string; to: string }[];
  refused: { serviceId: string; serviceName: string; allocationId: string | null; code: string; message: string }[];
  pending: { serviceId: string; serviceName: string; count: number; code: string }[];
}

/**
 * What evacuating the node moves (one at a time, by the scheduler) and what refuses, read as an evaluation reads
 * (POST /v1/nodes/:id/evacuate). A service on it that the scheduler does not manage (its home node's agent does
 * not speak allocations, or TETHER_ALLOCATIONS is off) refuses with NOT_MANAGED_BY_ALLOCATIONS.
 */
export async function evacuationAnswer(prisma: Db, nodeId: string, holdsSession: (nodeId: string) => boolean): Promise<EvacuationAnswer> {
  return prisma.$transaction((tx) => evacuationAnswerIn(tx, nodeId, holdsSession));
}

/** The same, on a transaction of the caller's (the evacuation's own, so the answer is the state it commits). */
export async function evacuationAnswerIn(tx: Tx, nodeId: string, holdsSession: (nodeId: string) => boolean): Promise<EvacuationAnswer> {
  const state = await readState(tx, holdsSession);
  const preview = previewEvacuation(nodeId, state);
  const sql = prismaSql(tx);
  const unmanaged = await sql.rows<{ id: string; name: string }>(
    `SELECT s.id, s.name FROM services s JOIN nodes h ON h.id = s.node_id WHERE s.node_id = $1 AND s.replicas > 0 AND NOT ${managedSql('s', 'h')} ORDER BY s.name`,
    [nodeId],
  );
  const ids = [...new Set([...preview.moves, ...preview.refused, ...preview.pending].map((c) => c.serviceId))];
  const names = new Map((await sql.rows<{ id: string; name: string }>(`SELECT id, name FROM services WHERE id = ANY($1::text[])`, [ids])).map((r) => [r.id, r.name]));
  const nodeName = new Map(state.nodes.map((n) => [n.id, n.name]));
  const name = (id: string) => names.get(id) ?? id;
  return {
    moves: preview.moves.map((m) => ({ serviceId: m.serviceId, serviceName: name(m.serviceId), allocationId: m.allocationId, from: nodeName.get(m.from) ?? m.from, to: nodeName.get(m.to) ?? m.to })),
    refused: [
      ...preview.refused.map((r) => ({ serviceId: r.serviceId, serviceName: name(r.serviceId), allocationId: r.allocationId, code: r.reason, message: r.message })),
      ...unmanaged.map((s) => ({
        serviceId: s.id,
        serviceName: s.name,
        allocationId: null,
        code: 'NOT_MANAGED_BY_ALLOCATIONS',
        message: 'the service runs by deploy frames on this node (its agent does not speak workload.allocations, or TETHER_ALLOCATIONS is off): it does not move',
      })),
    ],
    pending: preview.pending.map((p) => ({ serviceId: p.serviceId, serviceName: name(p.serviceId), count: p.count, code: p.reason })),
  };
}
