import { recordChange, type AuditContext } from '../audit/audit-entry.js';
import type { Db, Tx } from '../db/database.js';
import { AppError } from '../errors.js';
import type { Node } from '../generated/prisma/client.js';
import { generateToken, hashToken } from './tokens.js';
import { stringRecordOf } from '../db/json-columns.js';
import { mapPrismaError, toIso } from '../db/prisma-helpers.js';
import type { ApiDeps } from './api-deps.js';

// Nodes as the database knows them. Nothing here says whether a node is
// reachable: only a live session can (the session registry adds that).

type NodeWithCount = Node & { _count: { services: number } };

export type NodeLabels = Record<string, string>;

/** The labels column as stored (a JSON object of strings; anything else reads as none). */
export const labelsOf = (value: unknown): NodeLabels => stringRecordOf(value);

/** Most labels a node carries: placement matches them on every scheduling pass. */
export const MAX_NODE_LABELS = 32;

export const presentNode = (n: NodeWithCount) => ({
  id: n.id,
  name: n.name,
  labels: labelsOf(n.labels),
  cordoned: n.cordoned,
  evacuating: n.evacuating,
  decommissioned: n.decommissioned,
  decommissionedAt: toIso(n.decommissionedAt),
  lostAt: toIso(n.lostAt),
  createdAt: n.createdAt.toISOString(),
  lastSeenAt: toIso(n.lastSeenAt),
  services: n._count.services,
});

const withCount = { _count: { select: { services: true } } } as const;

/** Registers a node. The agent token is in this answer only; the database keeps its hash. */
export async function createNode(prisma: Db, input: { name: string; labels?: NodeLabels }, audit?: AuditContext) {
  const { name } = input;
  const token = generateToken('node');
  try {
    const node = await prisma.$transaction(async (tx) => {
      const created = await tx.node.create({ data: { name, tokenHash: hashToken(token), labels: input.labels ?? {} } });
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
    const updated = await markDecommissioned(tx, id, new Date());
    await recordChange(tx, audit, { action: 'node.decommission', targetType: 'node', targetId: id, teamId: null });
    return { node: updated, changed: true };
  });
  if (changed) events.emit('node.decommissioned', { nodeId: node.id });
  return getNode(prisma, node.id);
}

/** The decommission itself, on the caller's transaction: the flag, and its pending deployments failed with the reason. */
export async function markDecommissioned(tx: Tx, id: string, now: Date) {
  const updated = await tx.node.update({ where: { id }, data: { decommissioned: true, decommissionedAt: now } });
  await tx.deployment.updateMany({
    where: { nodeId: id, status: 'pending' },
    data: { status: 'failed', reason: 'the node was decommissioned', finishedAt: now },
  });
  return updated;
}

/**
 * Changes a node's labels, merged as kubectl label and nomad node meta apply do: a string sets a label, null
 * removes it, labels not named are kept. At most MAX_NODE_LABELS after the merge (400 VALIDATION_FAILED).
 */
export async function updateNode(prisma: Db, id: string, patch: { labels?: Record<string, string | null> }, audit?: AuditContext) {
  await prisma.$transaction(async (tx) => {
    const rows = await tx.$queryRaw<{ labels: unknown }[]>`SELECT labels FROM nodes WHERE id = ${id} FOR UPDATE`;
    if (!rows[0]) throw new AppError('NOT_FOUND', 'no such node');
    if (patch.labels === undefined) return;
    const labels = labelsOf(rows[0].labels);
    for (const [key, value] of Object.entries(patch.labels)) {
      if (value === null) delete labels[key];
      else labels[key] = value;
    }
    if (Object.keys(labels).length > MAX_NODE_LABELS) {
      throw new AppError('VALIDATION_FAILED', `a node carries at most ${MAX_NODE_LABELS} labels (this change leaves ${Object.keys(labels).length})`);
    }
    await tx.node.update({ where: { id }, data: { labels } });
    await recordChange(tx, audit, { action: 'node.update', targetType: 'node', targetId: id, teamId: null });
  });
  return getNode(prisma, id);
}

/**
 * Cordons a node (nothing new is placed on it; what runs there keeps running and deploying) or lifts it.
 * Idempotent: the audit records a change only. A decommissioned node is neither: 409 NODE_DECOMMISSIONED.
 */
export async function setCordon(prisma: Db, id: string, cordoned: boolean, audit?: AuditContext) {
  await prisma.$transaction(async (tx) => {
    const rows = await tx.$queryRaw<{ cordoned: boolean; evacuating: boolean; decommissioned: boolean; name: string }[]>`SELECT cordoned, evacuating, decommissioned, name FROM nodes WHERE id = ${id} FOR UPDATE`;
    const current = rows[0];
    if (!current) throw new AppError('NOT_FOUND', 'no such node');
    if (current.decommissioned) throw new AppError('NODE_DECOMMISSIONED', `node ${current.name} is decommissioned: it is never placed on again`);
    if (current.cordoned === cordoned && (cordoned || !current.evacuating)) return;
    // Uncordon ends an evacuation too; nothing moves back.
    await tx.node.update({ where: { id }, data: cordoned ? { cordoned } : { cordoned, evacuating: false } });
    await recordChange(tx, audit, { action: cordoned ? 'node.cordon' : 'node.uncordon', targetType: 'node', targetId: id, teamId: null });
  });
  return getNode(prisma, id);
}

/**
 * Evacuates a node (issue 36): cordons it and marks it evacuating, so the scheduler moves its managed replicas
 * to other nodes one at a time (each new one healthy before the old one drains). Idempotent: the audit records a
 * change only. A decommissioned node: 409 NODE_DECOMMISSIONED. Uncordon ends it.
 */
/**
 * `preview` runs in the same transaction, after the change: what it reads is the state the scheduler will act on
 * once this commits, before it could have started a move (an answer read after the commit once named a node the
 * scheduler had just filled).
 */
export async function evacuateNode<T = undefined>(prisma: Db, id: string, audit?: AuditContext, preview?: (tx: Tx) => Promise<T>) {
  const answer = await prisma.$transaction(async (tx) => {
    const rows = await tx.$queryRaw<{ cordoned: boolean; evacuating: boolean; decommissioned: boolean; name: string }[]>`SELECT cordoned, evacuating, decommissioned, name FROM nodes WHERE id = ${id} FOR UPDATE`;
    const current = rows[0];
    if (!current) throw new AppError('NOT_FOUND', 'no such node');
    if (current.decommissioned) throw new AppError('NODE_DECOMMISSIONED', `node ${current.name} is decommissioned: it is never placed on again`);
    if (!(current.cordoned && current.evacuating)) {
      await tx.node.update({ where: { id }, data: { cordoned: true, evacuating: true } });
      await recordChange(tx, audit, { action: 'node.evacuate', targetType: 'node', targetId: id, teamId: null });
    }
    return preview ? await preview(tx) : undefined;
  });
  return { node: await getNode(prisma, id), answer: answer as T };
}
