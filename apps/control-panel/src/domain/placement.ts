import { AppError } from '../errors.js';
import type { Node } from '../generated/prisma/client.js';
import { stringRecordOf } from '../db/json-columns.js';
import { lockNodeShared } from '../db/prisma-helpers.js';
import type { Tx } from '../db/database.js';

// Where a service runs. Its placement names the nodes it may run on (none:
// any) and the labels a node must carry. A node is eligible when it is in
// that list, carries those labels and is neither decommissioned nor cordoned;
// the service goes to the eligible node with the fewest services, ties broken
// by name so placement is predictable. A service whose node still fits a
// changed placement stays (nothing moves that need not). The chosen node is
// locked FOR SHARE until the transaction ends, so a concurrent decommission or
// cordon waits for the placement instead of racing it. A cordon only stops new
// placements: services already there keep deploying.
//
// A service runs on one home node, which the placement chooses here; the
// scheduler of issue 36 spreads a managed service's replicas from there. With
// no eligible node, a new service is still made (issue 36, capacity honest):
// `placeOrWait` answers why its replicas wait (NO_NODE_AVAILABLE,
// NO_NODE_MATCHES_LABELS) and the scheduler places them once a node is
// eligible, as Kubernetes keeps a pod Pending. What no later change of the
// fleet can cure is still refused: a node name that does not exist
// (UNKNOWN_NODE), one named node that is decommissioned (NODE_DECOMMISSIONED);
// one named node that is cordoned answers NODE_CORDONED (its operator chose to
// keep new work off it: name another). A move of a service that has a home
// is refused when nothing fits (it keeps running where it is).

export interface ServicePlacement {
  /** Node names the service may run on; empty: any. */
  nodes: string[];
  /** Labels a node must carry, each with this value. */
  labels: Record<string, string>;
}

export const ANYWHERE: ServicePlacement = { nodes: [], labels: {} };

/** The placement column as stored ({ nodes?, labels? }; anything else reads as anywhere). */
export function placementOf(value: unknown): ServicePlacement {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return { nodes: [], labels: {} };
  const { nodes, labels } = value as { nodes?: unknown; labels?: unknown };
  return {
    nodes: Array.isArray(nodes) ? nodes.filter((n): n is string => typeof n === 'string') : [],
    labels: stringRecordOf(labels),
  };
}

const describe = (p: ServicePlacement) =>
  [p.nodes.length > 0 ? `nodes ${p.nodes.join(', ')}` : '', Object.keys(p.labels).length > 0 ? `labels ${Object.entries(p.labels).map(([k, v]) => `${k}=${v}`).join(', ')}` : '']
    .filter(Boolean)
    .join(' and ');

/** True when the node (by id) is in the placement's list and carries its labels; cordons and decommissions aside. */
export async function nodeFits(tx: Tx, nodeId: string, placement: ServicePlacement): Promise<boolean> {
  const rows = await tx.$queryRaw<{ fits: boolean }[]>`
    SELECT (cardinality(${placement.nodes}::text[]) = 0 OR name = ANY(${placement.nodes}::text[]))
       AND labels @> ${JSON.stringify(placement.labels)}::jsonb AS fits
    FROM nodes WHERE id = ${nodeId}`;
  return rows[0]?.fits === true;
}

/** Why a new service's replicas wait: no node is eligible now (see above). */
export interface PlacementWait {
  code: 'NO_NODE_AVAILABLE' | 'NO_NODE_MATCHES_LABELS';
  message: string;
}

/** The node a new service goes to, or why its replicas wait for one (errors that no fleet change cures are thrown). */
export async function placeOrWait(tx: Tx, placement: ServicePlacement): Promise<Node | PlacementWait> {
  try {
    return await placeService(tx, placement);
  } catch (err) {
    if (err instanceof AppError && (err.code === 'NO_NODE_AVAILABLE' || err.code === 'NO_NODE_MATCHES_LABELS')) return { code: err.code, message: err.message };
    throw err;
  }
}

/** The node a service with this placement goes to (see above); locked FOR SHARE. */
export async function placeService(tx: Tx, placement: ServicePlacement): Promise<Node> {
  // One named node: its own answers (unknown, decommissioned, cordoned) say more than "none available".
  if (placement.nodes.length === 1) {
    const name = placement.nodes[0]!;
    const node = await tx.node.findUnique({ where: { name } });
    const locked = node && (await lockNodeShared(tx, node.id));
    if (!node || !locked) throw new AppError('UNKNOWN_NODE', `no node named ${name}`);
    if (locked.decommissioned) throw new AppError('NODE_DECOMMISSIONED', `node ${name} is decommissioned`);
    if (locked.cordoned) throw new AppError('NODE_CORDONED', `node ${name} is cordoned: choose another node, or uncordon it (POST /v1/nodes/${node.id}/uncordon, operators)`);
    if (!(await nodeFits(tx, node.id, placement))) throw new AppError('NO_NODE_MATCHES_LABELS', `node ${name} does not carry the labels ${describe({ nodes: [], labels: placement.labels })}`);
    return node;
  }
  for (const name of placement.nodes) {
    if (!(await tx.node.findUnique({ where: { name }, select: { id: true } }))) throw new AppError('UNKNOWN_NODE', `no node named ${name}`);
  }
  // A candidate can be decommissioned or cordoned between the choice and the lock; choose again then.
  for (let attempt = 0; attempt < 3; attempt++) {
    const [candidate] = await tx.$queryRaw<{ id: string }[]>`
      SELECT n.id FROM nodes n
      WHERE NOT n.decommissioned AND NOT n.cordoned
        AND (cardinality(${placement.nodes}::text[]) = 0 OR n.name = ANY(${placement.nodes}::text[]))
        AND n.labels @> ${JSON.stringify(placement.labels)}::jsonb
      ORDER BY (SELECT count(*) FROM services s WHERE s.node_id = n.id), n.name
      LIMIT 1`;
    if (!candidate) break;
    const locked = await lockNodeShared(tx, candidate.id);
    if (locked && !locked.decommissioned && !locked.cordoned) return tx.node.findUniqueOrThrow({ where: { id: candidate.id } });
  }
  return refuse(tx, placement);
}

/** Why nothing fits: every node that fits is cordoned, no node carries the labels, or there is no node at all. */
async function refuse(tx: Tx, placement: ServicePlacement): Promise<never> {
  const [{ cordoned }] = await tx.$queryRaw<{ cordoned: number }[]>`
    SELECT count(*)::int AS cordoned FROM nodes
    WHERE NOT decommissioned AND cordoned
      AND (cardinality(${placement.nodes}::text[]) = 0 OR name = ANY(${placement.nodes}::text[]))
      AND labels @> ${JSON.stringify(placement.labels)}::jsonb` as [{ cordoned: number }];
  if (cordoned > 0) {
    throw new AppError(
      'NO_NODE_AVAILABLE',
      `no node is available for ${describe(placement) || 'the service'}: ${cordoned === 1 ? 'the one that fits is' : `all ${cordoned} that fit are`} cordoned; uncordon one or register another with POST /v1/nodes (operators)`,
    );
  }
  if (Object.keys(placement.labels).length > 0) {
    throw new AppError('NO_NODE_MATCHES_LABELS', `no node that takes new services carries ${describe({ nodes: [], labels: placement.labels })}${placement.nodes.length > 0 ? ` among ${placement.nodes.join(', ')}` : ''}`);
  }
  throw new AppError(
    'NO_NODE_AVAILABLE',
    placement.nodes.length > 0 ? `no node is available among ${placement.nodes.join(', ')}: each is decommissioned` : 'no node is available: register one with POST /v1/nodes (operators)',
  );
}
