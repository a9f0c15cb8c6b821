import { AppError } from '../errors.js';
import { Prisma } from '../generated/prisma/client.js';
import type { Tx } from '../db/database.js';
import { DEFAULT_ROLLOUT, type ServiceSpec } from '../db/deployment-spec.js';
import { checkHealthCheckPort, checkReplicasWithVolumes, checkRollout } from './service-fields.js';

// A rollback (POST /v1/services/:id/rollback): the spec of a deployment that
// once ran is written back into the service, so the next plain deploy does
// not bring the bad release back, and deployed through the same path as any
// deploy (createDeployment), its row naming the deployment in `rollbackOf`.
// What comes back: image (as it ran, pinned by digest or by the node's image
// id when its agent reported it), env, command, args, resources, volumes,
// health check, and the internal port unless the service's routes need the
// one it has now. What stays: the name, the replicas, drainSeconds and rollout
// (rollout settings, not a release), the node, and the secrets' current values (their recorded versions are not
// restored: docs/api.md says so).

export interface RollbackRequest {
  /** The deployment whose spec to restore; default: the newest before the service's latest that reached running. */
  to?: string;
}

interface TargetRow {
  id: string;
  service_id: string;
  spec: ServiceSpec;
  running_at: Date | null;
  /** The image as it ran, pinned by its agent (deploy.result imageRef); null from older agents. */
  image_ref: string | null;
}

/** The service as createDeployment read it (in the caller's scope, node locked). */
export interface RollbackService {
  id: string;
  replicas: number;
  internalPort: number | null;
}

/**
 * Finds the target, writes its spec into the service (locked for the rest of
 * the transaction) and returns the spec the new deployment carries.
 */
export async function rollbackSpec(tx: Tx, service: RollbackService, current: ServiceSpec, request: RollbackRequest): Promise<{ targetId: string; spec: ServiceSpec }> {
  await tx.$queryRaw`SELECT 1 FROM services WHERE id = ${service.id} FOR UPDATE`;
  const target = request.to === undefined ? await defaultTarget(tx, service.id) : await namedTarget(tx, service.id, request.to);
  const old = target.spec;
  const hasRoutes = (await tx.route.count({ where: { serviceId: service.id } })) > 0;
  // Its routes would point at nothing: a release without a port cannot take the port away from routed traffic.
  const internalPort = old.internalPort === null && hasRoutes ? service.internalPort : old.internalPort;
  const spec: ServiceSpec = {
    name: current.name,
    // What ran, pinned: a tag moved since the release cannot change what comes back (the tag, from older agents).
    image: target.image_ref ?? old.image,
    env: old.env,
    internalPort,
    replicas: service.replicas,
    ...(current.secrets ? { secrets: current.secrets } : {}),
    command: old.command ?? null,
    args: old.args ?? null,
    resources: old.resources ?? null,
    volumes: old.volumes ?? [],
    healthCheck: old.healthCheck ?? null,
    // A rollout setting like replicas: the service's current one.
    ...(current.drainSeconds === undefined ? {} : { drainSeconds: current.drainSeconds }),
    // Never unfenced by going back to a release made before the fence: the service's current setting.
    ...(current.failover === undefined ? {} : { failover: current.failover }),
    // How to roll out, not what: the service's current rollout settings.
    ...(current.rollout === undefined ? {} : { rollout: current.rollout }),
  };
  checkReplicasWithVolumes(spec.replicas, spec.volumes ?? []);
  checkHealthCheckPort(spec.healthCheck ?? null, spec.internalPort);
  // A writable volume coming back refuses the surge the service's rollout asks for (set it to maxSurge 0 first).
  checkRollout(spec.rollout ?? DEFAULT_ROLLOUT, spec.volumes ?? [], spec.failover?.fence ?? false);
  const json = (value: unknown) => (value === null ? Prisma.DbNull : (value as Prisma.InputJsonValue));
  await tx.service.update({
    where: { id: service.id },
    data: {
      image: spec.image,
      env: spec.env,
      internalPort: spec.internalPort,
      command: json(spec.command),
      args: json(spec.args),
      resources: json(spec.resources),
      volumes: spec.volumes as unknown as Prisma.InputJsonValue,
      healthCheck: json(spec.healthCheck),
    },
  });
  return { targetId: target.id, spec };
}

async function defaultTarget(tx: Tx, serviceId: string): Promise<TargetRow> {
  // "Before the current one": the newest deployment of the service is what the rollback undoes (running now, or
  // the release that just failed); the newest older one that ever ran is what it goes back to.
  const rows = await tx.$queryRaw<TargetRow[]>`
    SELECT d.id, d.service_id, d.spec, d.running_at, d.image_ref FROM deployments d
    WHERE d.service_id = ${serviceId} AND d.running_at IS NOT NULL
      AND (d.created_at, d.id) < (SELECT l.created_at, l.id FROM deployments l WHERE l.service_id = ${serviceId} ORDER BY l.created_at DESC, l.id DESC LIMIT 1)
    ORDER BY d.created_at DESC, d.id DESC LIMIT 1`;
  const [row] = rows;
  if (!row) throw new AppError('NO_ROLLBACK_TARGET', 'no deployment before the latest one ever reached running: there is nothing to go back to');
  return row;
}

async function namedTarget(tx: Tx, serviceId: string, id: string): Promise<TargetRow> {
  const [row] = await tx.$queryRaw<TargetRow[]>`SELECT d.id, d.service_id, d.spec, d.running_at, d.image_ref FROM deployments d WHERE d.id = ${id}`;
  // Another service's deployment is not this service's to name, whether or not the caller may see it.
  if (!row || row.service_id !== serviceId) throw new AppError('NOT_FOUND', `service ${serviceId} has no deployment ${id}`);
  if (row.running_at === null) throw new AppError('ROLLBACK_TARGET_NEVER_RAN', `deployment ${id} never reached running: rolling back to it could only repeat its failure`);
  return row;
}
