import { recordChange, type AuditContext } from '../audit/audit-entry.js';
import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import type { Node } from '../generated/prisma/client.js';
import { generateToken, hashToken } from './tokens.js';
import { mapPrismaError, toIso } from '../db/prisma-helpers.js';
import type { ApiDeps } from './api-deps.js';

// Nodes as the database knows them. Nothing here says whether a node is
// reachable: only a live session can (the session registry adds that).

type NodeWithCount = Node & { _count: { services: number } };

export const presentNode = (n: NodeWithCount) => ({
  id: n.id,
  name: n.name,
  decommissioned: n.decommissioned,
  decommissionedAt: toIso(n.decommissionedAt),
  createdAt: n.createdAt.toISOString(),
  lastSeenAt: toIso(n.lastSeenAt),
  services: n._count.services,
});

const withCount = { _count: { select: { services: true } } } as const;

/** Registers a node. The agent token is in this answer only; the database keeps its hash. */
export async function createNode(prisma: Db, name: string, audit?: AuditContext) {
  const token = generateToken('node');
  try {
    const node = await prisma.$transaction(async (tx) => {
      const created = await tx.node.create({ data: { name, tokenHash: hashToken(token) } });
      await recordChange(tx, audit, { action: 'node.create', targetType: 'node', targetId: created.id, teamId: null });
      return created;
    });
    return { id: node.id, name: node.name, token };
  } catch (err) {
    mapPrismaError(err, { P2002: new AppError('CONFLICT', `a node named ${name} already exists`) });
  }
}

export async function listNodes(prisma: Db) {
  return (await prisma.node.findMany({ include: withCount, orderBy: { name: 'asc' } })).map(presentNode);
}

export async function getNode(prisma: Db, id: string) {
  const node = await prisma.node.findUnique({ where: { id }, include: withCount });
  if (!node) throw new AppError('NOT_FOUND', 'no such node');
  return presentNode(node);
}

/**
 * Decommissions a node: from now on its agent is refused and nothing new is
 * placed or deployed on it. Deployments still pending there end as failed
 * with the reason, in the same transaction, so none is left hanging. Its
 * services stay (a customer moves them with PATCH). Idempotent; the event is
 * emitted once, after the commit.
 */
export async function decommissionNode({ prisma, events }: ApiDeps, id: string, audit?: AuditContext) {
  const { node, changed } = await prisma.$transaction(async (tx) => {
    const current = await tx.node.findUnique({ where: { id } });
    if (!current) throw new AppError('NOT_FOUND', 'no such node');
    if (current.decommissioned) return { node: current, changed: false };
    const now = new Date();
    const updated = await tx.node.update({ where: { id }, data: { decommissioned: true, decommissionedAt: now } });
    await tx.deployment.updateMany({
      where: { nodeId: id, status: 'pending' },
      data: { status: 'failed', reason: 'the node was decommissioned', finishedAt: now },
    });
    await recordChange(tx, audit, { action: 'node.decommission', targetType: 'node', targetId: id, teamId: null });
    return { node: updated, changed: true };
  });
  if (changed) events.emit('node.decommissioned', { nodeId: node.id });
  return getNode(prisma, node.id);
}
