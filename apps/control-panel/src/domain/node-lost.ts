import { recordChange, type AuditContext } from '../audit/audit-entry.js';
import type { Tx } from '../db/database.js';
import type { ServiceVolume } from '../db/deployment-spec.js';
import { prismaSql } from '../db/sql.js';
import { sqlOf } from '../db/database.js';
import { AppError } from '../errors.js';
import { routingNodeIds } from '../routing/serving-nodes.js';
import { ALLOCATIONS_CAPABILITY, LIVE_ELSEWHERE, managedSql } from '../scheduling/managed.js';
import type { ApiDeps } from './api-deps.js';
import { moveDomainsOf } from './domain-claims.js';
import { getNode, markDecommissioned } from './nodes.js';
import { placementOf, type ServicePlacement } from './placement.js';

// An operator says a node's host is gone (issue 38, POST /v1/nodes/:id/lost):
// what the scheduler never does on a guess. The node is decommissioned (its
// agent refused from now on, its session closed with 4005) and marked lost,
// and every service whose home it is moves its home to another node its
// placement allows, as a move with leaveVolumes does: its domains follow, and
// the new node makes its volumes anew, empty (the data is on the lost host:
// it comes back from the operator's backup). A new home must be live (a
// session on some panel), not cordoned, and, for a service the scheduler
// places, speak allocations when such a node fits; the fewest services first,
// then by name. The scheduler then stops the replicas on the lost node and
// places them (a stateful one on its new home) at once: a decommissioned node
// is lost to it, no grace, no brake. A service with nowhere to go stays and
// is listed with the reason; a later call places what an earlier one could
// not, and once nothing is homed there the call changes nothing.

export interface LostMove {
  serviceId: string;
  serviceName: string;
  from: string;
  to: string;
  /** Its volumes, made anew and empty on `to`: restore their data from a backup. */
  emptyVolumes: { name: string; mountPath: string }[];
}

export interface LostPending {
  serviceId: string;
  serviceName: string;
  code: 'NO_NODE_AVAILABLE' | 'NO_NODE_MATCHES_LABELS';
  message: string;
}

export interface LostAnswer {
  moved: LostMove[];
  pending: LostPending[];
}

interface HomedService {
  id: string;
  name: string;
  placement: unknown;
  volumes: ServiceVolume[] | null;
  managed: boolean;
  routes: number;
}

/**
 * Declares the node lost (see above). `holdsSession`: whether this panel holds a live session of a node (with the
 * other panels' report rows, the liveness a new home needs). Events go out after the commit.
 */
export async function declareNodeLost({ prisma, events }: ApiDeps, id: string, holdsSession: (nodeId: string) => boolean, audit?: AuditContext) {
  const done = await prisma.$transaction(async (tx) => {
    const [current] = await tx.$queryRaw<{ name: string; decommissioned: boolean; lost_at: Date | null }[]>`SELECT name, decommissioned, lost_at FROM nodes WHERE id = ${id} FOR UPDATE`;
    if (!current) throw new AppError('NOT_FOUND', 'no such node');
    const now = new Date();
    if (!current.decommissioned) await markDecommissioned(tx, id, now);
    if (current.lost_at === null) await tx.node.update({ where: { id }, data: { lostAt: now } });
    const answer = await rehome(tx, { id, name: current.name }, holdsSession);
    if (!current.decommissioned || current.lost_at === null || answer.moved.length > 0) {
      await recordChange(tx, audit, { action: 'node.lost', targetType: 'node', targetId: id, teamId: null });
    }
    return { answer, decommissioned: !current.decommissioned };
  });
  const { answer, decommissioned } = done;
  if (decommissioned) events.emit('node.decommissioned', { nodeId: id });
  for (const m of answer.moved) {
    events.emit('workloads.changed', { nodeId: m.toId, reason: `service ${m.serviceName} moved here: node ${m.from} declared lost` });
    if (!answer.routed.has(m.serviceId)) continue;
    const nodeIds = [...new Set([id, ...(await routingNodeIds(sqlOf(prisma), m.serviceId, m.toId))])];
    events.emit('routing.changed', { nodeIds, reason: `service ${m.serviceName} moved: node ${m.from} declared lost` });
  }
  events.emit('scheduler.nudge', { reason: 'node declared lost', nodeId: id });
  return { node: await getNode(prisma, id), moved: answer.moved.map(({ toId: _toId, ...m }) => m), pending: answer.pending };
}

/** Moves every service homed on the lost node (locked) to its new home, in the caller's transaction. */
async function rehome(tx: Tx, lost: { id: string; name: string }, holdsSession: (nodeId: string) => boolean) {
  const sql = prismaSql(tx);
  const services = await sql.rows<HomedService>(
    `SELECT s.id, s.name, s.placement, s.volumes, ${managedSql('s', 'h')} AS managed, (SELECT count(*)::int FROM routes r WHERE r.service_id = s.id) AS routes
    FROM services s JOIN nodes h ON h.id = s.node_id WHERE s.node_id = $1 ORDER BY s.name FOR UPDATE OF s`,
    [lost.id],
  );
  const moved: (LostMove & { toId: string })[] = [];
  const pending: LostPending[] = [];
  const routed = new Set<string>();
  for (const service of services) {
    const placement = placementOf(service.placement);
    const home = await newHome(tx, lost.id, placement, service.managed, holdsSession);
    if ('code' in home) {
      pending.push({ serviceId: service.id, serviceName: service.name, ...home });
      continue;
    }
    await moveDomainsOf(tx, service.id, home.id);
    await tx.service.update({ where: { id: service.id }, data: { nodeId: home.id } });
    if (service.routes > 0) routed.add(service.id);
    const volumes = Array.isArray(service.volumes) ? service.volumes : [];
    moved.push({ serviceId: service.id, serviceName: service.name, from: lost.name, to: home.name, toId: home.id, emptyVolumes: volumes.map((v) => ({ name: v.name, mountPath: v.mountPath })) });
  }
  return { moved, pending, routed };
}

/** The new home (see the top of this file), or why there is none. */
async function newHome(
  tx: Tx,
  lostId: string,
  placement: ServicePlacement,
  managed: boolean,
  holdsSession: (nodeId: string) => boolean,
): Promise<{ id: string; name: string } | Omit<LostPending, 'serviceId' | 'serviceName'>> {
  const candidates = await prismaSql(tx).rows<{ id: string; name: string; capable: boolean; live_elsewhere: boolean; labelled: boolean }>(
    `SELECT n.id, n.name, '${ALLOCATIONS_CAPABILITY}' = ANY(n.capabilities) AS capable, ${LIVE_ELSEWHERE} AS live_elsewhere,
      n.labels @> $3::jsonb AS labelled
    FROM nodes n
    WHERE n.id <> $1 AND NOT n.decommissioned AND NOT n.cordoned AND (cardinality($2::text[]) = 0 OR n.name = ANY($2::text[]))
    ORDER BY (SELECT count(*) FROM services s WHERE s.node_id = n.id), n.name`,
    [lostId, placement.nodes, JSON.stringify(placement.labels)],
  );
  const live = candidates.filter((n) => holdsSession(n.id) || n.live_elsewhere);
  const fitting = live.filter((n) => n.labelled);
  const pick = (managed ? fitting.find((n) => n.capable) : undefined) ?? fitting[0];
  if (pick) return { id: pick.id, name: pick.name };
  const where = placement.nodes.length > 0 ? ` among ${placement.nodes.join(', ')}` : '';
  if (live.length > 0) {
    const labels = Object.entries(placement.labels).map(([k, v]) => `${k}=${v}`).join(', ');
    return { code: 'NO_NODE_MATCHES_LABELS', message: `no live node${where} carries ${labels}: it stays homed on the lost node; change its placement to move it` };
  }
  return {
    code: 'NO_NODE_AVAILABLE',
    message: `no other live, uncordoned node${where} fits its placement: it stays homed on the lost node; register or uncordon one and declare the node lost again, or change its placement`,
  };
}
