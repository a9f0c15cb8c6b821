import { AppError } from '../errors.js';
import { recordChange, type AuditChange, type AuditContext } from '../audit/audit-entry.js';
import type { Prisma } from '../generated/prisma/client.js';
import { teamScope, type AuthContext } from './access.js';
import { lockService, mapPrismaError } from '../db/prisma-helpers.js';
import type { Tx } from '../db/database.js';
import { DEFAULT_DRAIN_SECONDS, DEFAULT_ROLLOUT, type ServiceRollout, type ServiceSpec } from '../db/deployment-spec.js';
import { checkHealthCheckPort, checkReplicasWithVolumes, checkRollout, normaliseHealthCheck, normaliseRollout, normaliseVolumes, type HealthCheckInput, type VolumeInput } from './service-fields.js';
import type { ApiDeps } from './api-deps.js';
import { moveDomainsOf } from './domain-claims.js';
import { routingNodeIds } from '../routing/serving-nodes.js';
import { sqlOf } from '../db/database.js';
import { prismaSql } from '../db/sql.js';
import { ANYWHERE, nodeFits, placementOf, placeOrWait, placeService, type ServicePlacement } from './placement.js';
import { checkSecretNames, secretsOfService, writeServiceSecrets, type SecretsPatch } from './service-secrets.js';
import { presentService, processColumns, processSpecOf, rolloutColumns, rolloutOf } from './service-rows.js';

export type { ServiceSpec };

export interface CreateServiceInput extends Partial<Omit<ServiceSpec, 'name' | 'image' | 'secrets' | 'registry' | 'volumes' | 'healthCheck' | 'rollout'>> {
  name: string;
  /** A field left out, or the whole object null: its default. */
  rollout?: Partial<ServiceRollout> | null;
  image: string;
  volumes?: VolumeInput[];
  healthCheck?: HealthCheckInput | null;
  node?: string;
  placement?: Partial<ServicePlacement>;
  teamId?: string;
  secrets?: Record<string, string>;
}

export type UpdateServiceInput = Partial<Omit<ServiceSpec, 'secrets' | 'volumes' | 'healthCheck' | 'rollout'>> & {
  /** Replaces the rollout settings whole (a field left out is its default); null: every one its default. */
  rollout?: Partial<ServiceRollout> | null;
  volumes?: VolumeInput[];
  healthCheck?: HealthCheckInput | null;
  node?: string;
  /** Replaces the placement whole (a field left out is empty); `node` alone keeps the labels. */
  placement?: Partial<ServicePlacement>;
  secrets?: SecretsPatch;
  /** Moving a service with volumes leaves them on the old node (empty ones are made on the new). */
  leaveVolumes?: boolean;
};

/** Tells whoever acts on the service's node that it changed: its home node's workload set, or the scheduler when it has none. */
function announce(events: ApiDeps['events'], nodeId: string | null, reason: string): void {
  if (nodeId === null) events.emit('scheduler.nudge', { reason });
  else events.emit('workloads.changed', { nodeId, reason });
}

const withNode = { node: { select: { id: true, name: true } }, ...secretsOfService } as const;
const nameTaken = (name: string) => new AppError('CONFLICT', `the team already has a service named ${name}`);
const notFound = () => new AppError('NOT_FOUND', 'no such service');

/**
 * The placement a request asks for: `node` is shorthand for `placement.nodes: [node]` (both: they must agree),
 * `placement` replaces the one before whole, `node` alone keeps its labels.
 */
function requestedPlacement(input: { node?: string; placement?: Partial<ServicePlacement> }, before: ServicePlacement): ServicePlacement {
  if (input.node !== undefined && input.placement?.nodes !== undefined && (input.placement.nodes.length !== 1 || input.placement.nodes[0] !== input.node)) {
    throw new AppError('VALIDATION_FAILED', `node ${input.node} and placement.nodes ${JSON.stringify(input.placement.nodes)} disagree: give one of them`);
  }
  const base = input.placement ? { nodes: input.placement.nodes ?? [], labels: input.placement.labels ?? {} } : before;
  return { nodes: input.node !== undefined ? [input.node] : [...new Set(base.nodes)], labels: base.labels };
}

/** The team a new service belongs to: the customer's own, or the one an operator names. */
async function owningTeam(tx: Tx, auth: AuthContext, teamId: string | undefined): Promise<string> {
  if (auth.role === 'customer') {
    if (teamId !== undefined && teamId !== auth.teamId) throw new AppError('NOT_FOUND', 'no such team');
    return teamScope(auth).teamId!;
  }
  if (teamId === undefined) throw new AppError('VALIDATION_FAILED', 'operators must name the teamId the service belongs to');
  if (!(await tx.team.findUnique({ where: { id: teamId }, select: { id: true } }))) throw new AppError('NOT_FOUND', 'no such team');
  return teamId;
}

/** The audit rows of secrets set or removed (by name; never a value). */
const secretChanges = (serviceId: string, teamId: string, patch: Record<string, string | null>): AuditChange[] =>
  Object.entries(patch).map(([name, value]) => ({ action: value === null ? 'secret.remove' : 'secret.set', targetType: 'secret', targetId: `${serviceId}/${name}`, teamId }));

export async function createService({ prisma, events, keyring, placesLater }: ApiDeps, auth: AuthContext, input: CreateServiceInput, audit?: AuditContext) {
  checkSecretNames(input.env ?? {}, Object.keys(input.secrets ?? {}), keyring, input.secrets ?? {});
  const volumes = normaliseVolumes(input.volumes ?? []);
  checkReplicasWithVolumes(input.replicas ?? 1, volumes);
  const healthCheck = normaliseHealthCheck(input.healthCheck) ?? null;
  checkHealthCheckPort(healthCheck, input.internalPort ?? null);
  const rollout = normaliseRollout(input.rollout) ?? DEFAULT_ROLLOUT;
  checkRollout(rollout, volumes, input.failover?.fence ?? false);
  const service = await prisma.$transaction(async (tx) => {
    const teamId = await owningTeam(tx, auth, input.teamId);
    const placement = requestedPlacement(input, ANYWHERE);
    // No eligible node: made without a home, its replicas pending, when a scheduler will place them.
    const node = placesLater ? await placeOrWait(tx, placement) : await placeService(tx, placement);
    const wait = 'code' in node ? { count: input.replicas ?? 1, code: node.code, message: node.message } : null;
    try {
      const created = await tx.service.create({
        data: {
          teamId,
          nodeId: 'code' in node ? null : node.id,
          ...(wait ? { pending: wait } : {}),
          placement: placement as unknown as Prisma.InputJsonValue,
          name: input.name,
          image: input.image,
          env: input.env ?? {},
          internalPort: input.internalPort ?? null,
          replicas: input.replicas ?? 1,
          drainSeconds: input.drainSeconds ?? DEFAULT_DRAIN_SECONDS,
          fence: input.failover?.fence ?? false,
          ...rolloutColumns(rollout),
          ...processColumns({ ...input, volumes, healthCheck }),
        },
        select: { id: true },
      });
      await writeServiceSecrets(tx, keyring, created.id, input.secrets ?? {});
      await recordChange(tx, audit, { action: 'service.create', targetType: 'service', targetId: created.id, teamId }, ...secretChanges(created.id, teamId, input.secrets ?? {}));
      return await tx.service.findUniqueOrThrow({ where: { id: created.id }, include: withNode });
    } catch (err) {
      mapPrismaError(err, { P2002: nameTaken(input.name) });
    }
  });
  announce(events, service.nodeId, `service ${service.name} created`);
  return presentService(service);
}

export async function listServices({ prisma }: ApiDeps, auth: AuthContext, filter: { teamId?: string }) {
  const rows = await prisma.service.findMany({
    where: { AND: [teamScope(auth), filter.teamId ? { teamId: filter.teamId } : {}] },
    include: withNode,
    orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
  });
  return rows.map(presentService);
}

export async function getService({ prisma }: ApiDeps, auth: AuthContext, id: string) {
  const service = await prisma.service.findFirst({ where: { id, ...teamScope(auth) }, include: withNode });
  if (!service) throw notFound();
  return presentService(service);
}

/** Finds a service the caller may change and locks it for the rest of the transaction. */
async function lockOwnService(tx: Tx, auth: AuthContext, id: string) {
  const visible = await tx.service.findFirst({ where: { id, ...teamScope(auth) }, select: { id: true } });
  if (!visible || !(await lockService(tx, id, 'update'))) throw notFound();
  return tx.service.findUniqueOrThrow({ where: { id }, include: { ...withNode, _count: { select: { routes: true } } } });
}

export async function updateService({ prisma, events, keyring }: ApiDeps, auth: AuthContext, id: string, patch: UpdateServiceInput, audit?: AuditContext) {
  const { before, after, routes } = await prisma.$transaction(async (tx) => {
    const current = await lockOwnService(tx, auth, id);
    // env replaces, secrets merge: the names they will have must not meet.
    const secretNames = new Set(current.secrets.map((x) => x.name));
    for (const [name, value] of Object.entries(patch.secrets ?? {})) {
      if (value === null) secretNames.delete(name);
      else secretNames.add(name);
    }
    checkSecretNames(patch.env ?? (current.env as Record<string, string>), [...secretNames], keyring, patch.secrets ?? {});
    await writeServiceSecrets(tx, keyring, id, patch.secrets ?? {});
    const { secrets: _secrets, ...fields } = patch;
    const changes = [...(Object.keys(fields).length > 0 ? [{ action: 'service.update', targetType: 'service', targetId: id, teamId: current.teamId }] : []), ...secretChanges(id, current.teamId, patch.secrets ?? {})];
    await recordChange(tx, audit, ...changes);
    const data: Prisma.ServiceUncheckedUpdateInput = {
      name: patch.name,
      image: patch.image,
      env: patch.env,
      internalPort: patch.internalPort,
      replicas: patch.replicas,
      drainSeconds: patch.drainSeconds,
      fence: patch.failover?.fence,
      ...rolloutColumns(normaliseRollout(patch.rollout)),
      ...processColumns({ ...patch, volumes: patch.volumes === undefined ? undefined : normaliseVolumes(patch.volumes), healthCheck: normaliseHealthCheck(patch.healthCheck) }),
    };
    const check = patch.healthCheck === undefined ? processSpecOf(current).healthCheck : (normaliseHealthCheck(patch.healthCheck) ?? null);
    checkHealthCheckPort(check, patch.internalPort === undefined ? current.internalPort : patch.internalPort);
    const { volumes } = processSpecOf({ ...current, ...(data.volumes === undefined ? {} : { volumes: data.volumes as Prisma.JsonValue }) });
    checkReplicasWithVolumes(patch.replicas ?? current.replicas, volumes);
    // The rollout as it will be, against the volumes and fence as they will be (a volume or fence added refuses a surge set before).
    checkRollout(normaliseRollout(patch.rollout) ?? rolloutOf(current), volumes, patch.failover?.fence ?? current.fence);
    // Its routes would point at nothing (and leave the routing map silently).
    if (patch.internalPort === null && current._count.routes > 0) {
      throw new AppError('SERVICE_HAS_NO_PORT', `service ${current.name} has routes: detach them before removing its internalPort`);
    }
    // A node that still fits the new placement keeps the service (naming the node it is on already is no move,
    // even when that node is decommissioned or cordoned); otherwise it moves where the placement says.
    if (patch.node !== undefined || patch.placement !== undefined) {
      const placement = requestedPlacement(patch, placementOf(current.placement));
      data.placement = placement as unknown as Prisma.InputJsonValue;
      if (current.nodeId === null) {
        // No home yet: the names are checked, the scheduler places it (and says again why it waits, if it does).
        const node = await placeOrWait(tx, placement);
        if ('code' in node) data.pending = { count: patch.replicas ?? current.replicas, code: node.code, message: node.message };
      } else if (!(await nodeFits(tx, current.nodeId, placement))) {
        // Volumes live on the node: a move would start the service on empty ones, unless the caller says so.
        const kept = processSpecOf(current).volumes;
        if (kept.length > 0 && patch.leaveVolumes !== true) {
          throw new AppError('SERVICE_HAS_VOLUMES', `service ${current.name} has volumes on node ${current.node?.name} (${kept.map((v) => v.name).join(', ')}): moving it starts it on empty ones; say "leaveVolumes": true to move anyway`);
        }
        data.nodeId = (await placeService(tx, placement)).id;
      }
    }
    // The domains only its routes use go with it.
    if (typeof data.nodeId === 'string') await moveDomainsOf(tx, id, data.nodeId);
    try {
      const updated = await tx.service.update({ where: { id }, data, include: withNode });
      return { before: current, after: updated, routes: current._count.routes };
    } catch (err) {
      mapPrismaError(err, { P2002: nameTaken(patch.name ?? current.name) });
    }
  });
  const moved = before.nodeId !== after.nodeId;
  for (const nodeId of new Set([before.nodeId, after.nodeId])) {
    const what = moved ? (nodeId === before.nodeId ? `moved away` : `moved here`) : 'updated';
    announce(events, nodeId, `service ${after.name} ${what}`);
  }
  // Upstreams are derived from the service's node, name and port.
  const upstreamChanged = moved || before.internalPort !== after.internalPort || before.name !== after.name;
  if (routes > 0 && upstreamChanged) {
    const nodeIds = [...new Set([before.nodeId, ...(await routingNodeIds(sqlOf(prisma), id, after.nodeId))])].filter((n): n is string => n !== null);
    const why = moved ? 'moved' : before.internalPort !== after.internalPort ? `port ${after.internalPort ?? 'none'}` : `renamed from ${before.name}`;
    events.emit('routing.changed', { nodeIds, reason: `service ${after.name} ${why}` });
  }
  return presentService(after);
}

export async function deleteService({ prisma, events, volumes }: ApiDeps, auth: AuthContext, id: string, options: { deleteVolumes?: boolean; audit?: AuditContext } = {}): Promise<void> {
  const deleted = await prisma.$transaction(async (tx) => {
    const current = await lockOwnService(tx, auth, id);
    // The node must be able to take the removal now, or nothing is deleted (no Docker work inside the transaction).
    // A service without a home never ran anywhere: it has no volumes to remove.
    if (options.deleteVolumes && current.node) {
      if (!volumes) throw new AppError('NODE_UNREACHABLE', 'this panel cannot reach nodes: volumes cannot be removed; nothing was deleted');
      volumes.check({ id: current.node.id, name: current.node.name });
    }
    // Before the delete takes its allocations along: every node serving its routes drops them.
    const routingNodes = current._count.routes > 0 ? await routingNodeIds(prismaSql(tx), id, current.nodeId) : [];
    await tx.service.delete({ where: { id } });
    await recordChange(tx, options.audit, { action: 'service.delete', targetType: 'service', targetId: id, teamId: current.teamId });
    return { ...current, routingNodes };
  });
  announce(events, deleted.nodeId, `service ${deleted.name} deleted`);
  if (deleted._count.routes > 0) {
    events.emit('routing.changed', { nodeIds: deleted.routingNodes, reason: `service ${deleted.name} deleted with its routes` });
  }
  // After the commit: the agent removes the containers, then the volumes. Not delivered, the volumes stay.
  if (options.deleteVolumes && deleted.node) await volumes!.remove({ id: deleted.node.id, name: deleted.node.name }, deleted.id);
}
