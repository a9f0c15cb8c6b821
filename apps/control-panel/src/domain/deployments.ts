import { errorMessage, sanitizeText, truncate } from '@tether/common';
import { registryHostOf } from '@tether/protocol';
import { AppError } from '../errors.js';
import { recordChange, type AuditContext } from '../audit/audit-entry.js';
import type { Deployment, Prisma } from '../generated/prisma/client.js';
import { teamScope, type AuthContext } from './access.js';
import { toIso } from '../db/prisma-helpers.js';
import { prismaSql } from '../db/sql.js';
import type { ApiDeps } from './api-deps.js';
import type { ServiceSpec } from './services.js';
import { rollbackSpec, type RollbackRequest } from './rollback.js';
import { managedSql } from '../db/where-services-run.js';
import { DEFAULT_DRAIN_SECONDS, DEFAULT_ROLLOUT, workloadOf, type ServiceHealthCheck, type ServiceResources, type ServiceVolume } from '../db/deployment-spec.js';

// A deployment carries out a snapshot of its service's spec on the service's
// node. The row is committed (status pending) before it is dispatched, so a
// crash between the two leaves a visible pending row, never a lost request.

export const presentDeployment = (d: Deployment) => ({
  id: d.id,
  serviceId: d.serviceId,
  nodeId: d.nodeId,
  // Rows made before command, resources and volumes existed carry none of them.
  // Rows made before drainSeconds: their agent drained its own way, which the default stands for.
  spec: { command: null, args: null, resources: null, volumes: [], healthCheck: null, drainSeconds: DEFAULT_DRAIN_SECONDS, failover: { fence: false }, rollout: DEFAULT_ROLLOUT, ...(d.spec as unknown as ServiceSpec) },
  status: d.status,
  reason: d.reason,
  sessionId: d.sessionId,
  createdAt: d.createdAt.toISOString(),
  dispatchedAt: toIso(d.dispatchedAt),
  ackedAt: toIso(d.ackedAt),
  finishedAt: toIso(d.finishedAt),
  runningAt: toIso(d.runningAt),
  rollbackOf: d.rollbackOf,
  imageRef: d.imageRef,
  reportsDrain: d.reportsDrain,
  connectionsOpenAtSwitch: d.connectionsOpenAtSwitch,
  connectionsCut: d.connectionsCut,
  drainEndedAt: toIso(d.drainEndedAt),
});

export { workloadOf };

const notFound = () => new AppError('NOT_FOUND', 'no such deployment');

interface ServiceToDeploy {
  /** Null: the service has no home yet (its replicas pending); the scheduler gives the deployment one with it. */
  node_id: string | null;
  team_id: string;
  node_name: string | null;
  decommissioned: boolean | null;
  name: string;
  image: string;
  env: Record<string, string>;
  internal_port: number | null;
  replicas: number;
  secrets: { name: string; version: number }[];
  registries: { id: string; host: string }[];
  command: string[] | null;
  args: string[] | null;
  resources: ServiceResources | null;
  volumes: ServiceVolume[];
  health_check: ServiceHealthCheck | null;
  drain_seconds: number;
  fence: boolean;
  rollout_max_surge: number | null;
  rollout_max_unavailable: number | null;
  rollout_progress_deadline_seconds: number | null;
  /** Its home node speaks allocations (scheduling/managed.ts): the scheduler rolls it out, no deploy frame. */
  managed: boolean;
}

/**
 * Records a deployment of the service's current spec and hands it to the
 * dispatcher. A service on a decommissioned node is refused with
 * NODE_DECOMMISSIONED and no row is created (the node row is locked FOR SHARE
 * while the deployment is inserted, so a decommission cannot slip between).
 * Four round trips: BEGIN, the service (in the caller's scope) with its node
 * locked in one statement, the insert, COMMIT. (One statement would need the
 * row's id made outside Prisma, which makes the cuid.)
 */
export async function createDeployment({ prisma, dispatcher, events }: ApiDeps, auth: AuthContext, serviceId: string, audit?: AuditContext, rollback?: RollbackRequest) {
  const { teamId } = teamScope(auth);
  const { deployment, nodeName, spec, managed } = await prisma.$transaction(async (tx) => {
    // FOR SHARE OF n: a decommission waiting on the lock or committed before it is seen (the locked row is re-read).
    // A service without a home is read the second way, its own row locked instead: the scheduler setting its home
    // waits, and gives this deployment that home too. Homed between the two reads: the first way again.
    const read = (homed: boolean) =>
      prismaSql(tx).rows<ServiceToDeploy>(
        `SELECT s.node_id, s.team_id, n.name AS node_name, n.decommissioned, s.name, s.image, s.env, s.internal_port, s.replicas,
        s.command, s.args, s.resources, s.volumes, s.health_check, s.drain_seconds, s.fence,
        s.rollout_max_surge, s.rollout_max_unavailable, s.rollout_progress_deadline_seconds,
        (SELECT COALESCE(json_agg(json_build_object('name', x.name, 'version', x.version) ORDER BY x.name), '[]'::json)
          FROM service_secrets x WHERE x.service_id = s.id AND x.removed_at IS NULL) AS secrets,
        (SELECT COALESCE(json_agg(json_build_object('id', r.id, 'host', r.host)), '[]'::json) FROM registries r WHERE r.team_id = s.team_id) AS registries,
        ${managedSql('s', 'n')} AS managed
      FROM services s ${homed ? 'JOIN nodes n ON n.id = s.node_id' : 'LEFT JOIN nodes n ON false'}
      WHERE s.id = $1 AND ($2::text IS NULL OR s.team_id = $2) ${homed ? '' : 'AND s.node_id IS NULL'}
      FOR SHARE OF ${homed ? 'n' : 's'}`,
        [serviceId, teamId ?? null],
      );
    let [service] = await read(true);
    if (!service) [service] = await read(false);
    if (!service) [service] = await read(true);
    if (!service) throw new AppError('NOT_FOUND', 'no such service');
    if (service.decommissioned) {
      throw new AppError('NODE_DECOMMISSIONED', `node ${service.node_name} is decommissioned; move the service to another node first`);
    }
    // The team's credentials for the image's registry, if it has them: recorded by id, opened when the frame leaves.
    const registry = service.registries.find((r) => r.host === registryHostOf(service.image));
    let spec: ServiceSpec = {
      name: service.name,
      image: service.image,
      env: service.env,
      internalPort: service.internal_port,
      replicas: service.replicas,
      ...(service.secrets.length > 0 ? { secrets: service.secrets } : {}),
      ...(registry ? { registry } : {}),
      command: service.command,
      args: service.args,
      resources: service.resources,
      volumes: service.volumes,
      healthCheck: service.health_check,
      drainSeconds: service.drain_seconds,
      failover: { fence: service.fence },
      rollout: { maxSurge: service.rollout_max_surge, maxUnavailable: service.rollout_max_unavailable, progressDeadlineSeconds: service.rollout_progress_deadline_seconds },
    };
    let rollbackOf: string | null = null;
    if (rollback) ({ targetId: rollbackOf, spec } = await rollbackSpec(tx, { id: serviceId, replicas: service.replicas, internalPort: service.internal_port }, spec, rollback));
    // A managed service's deployment is handed to the scheduler at once (dispatched_at set: no panel sends it as a deploy frame).
    const handed = service.managed
      ? {
          dispatchedAt: new Date(),
          reason: service.node_id === null ? 'handed to the scheduler: the service has no node yet (its replicas are pending); it rolls the release out once they are placed' : 'handed to the scheduler: it rolls the release out across nodes',
        }
      : {};
    const deployment = await tx.deployment.create({
      data: { serviceId, nodeId: service.node_id, spec: { ...spec } as unknown as Prisma.InputJsonObject, status: 'pending', rollbackOf, ...handed },
    });
    await recordChange(tx, audit, { action: rollback ? 'deployment.rollback' : 'deployment.create', targetType: 'deployment', targetId: deployment.id, teamId: service.team_id });
    return { deployment, nodeName: service.node_name, spec, managed: service.managed };
  });

  if (managed) {
    // Issue 36: the new deployment is the service's target release; the scheduler moves its allocations to it
    // step by step and ends the row running or failed (cluster/scheduler-loop.ts). 201: recorded, not yet sent.
    events.emit('scheduler.nudge', { reason: `deployment ${deployment.id} created`, ...(deployment.nodeId ? { nodeId: deployment.nodeId } : {}) });
    return { httpStatus: 201 as const, deployment: presentDeployment(deployment) };
  }

  const workload = workloadOf(serviceId, deployment.id, spec);
  let outcome;
  try {
    // Unmanaged: it has a home (a service without one is managed), so the row names a node.
    outcome = await dispatcher.dispatch({ deploymentId: deployment.id, nodeId: deployment.nodeId!, nodeName: nodeName!, workload });
  } catch (err) {
    // Dispatchers record the terminal state before throwing an AppError. Anything
    // else is a bug; end the row anyway so the customer's request is not left pending.
    if (!(err instanceof AppError)) {
      await prisma.deployment.updateMany({
        where: { id: deployment.id, status: 'pending' },
        data: { status: 'failed', reason: truncate(sanitizeText(`dispatch failed: ${errorMessage(err)}`), 1000), finishedAt: new Date() },
      });
    }
    throw err;
  }
  const current = await prisma.deployment.findUnique({ where: { id: deployment.id } });
  // The service (and with it the deployment) can be deleted while dispatching.
  if (!current) throw notFound();
  return { httpStatus: outcome.httpStatus, deployment: presentDeployment(current) };
}

export async function getDeployment({ prisma }: ApiDeps, auth: AuthContext, id: string) {
  const deployment = await prisma.deployment.findFirst({ where: { id, service: teamScope(auth) } });
  if (!deployment) throw notFound();
  return presentDeployment(deployment);
}

/** A service's deployments, newest first. */
export async function listServiceDeployments({ prisma }: ApiDeps, auth: AuthContext, serviceId: string, limit: number) {
  const service = await prisma.service.findFirst({ where: { id: serviceId, ...teamScope(auth) }, select: { id: true } });
  if (!service) throw new AppError('NOT_FOUND', 'no such service');
  const rows = await prisma.deployment.findMany({ where: { serviceId }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], take: limit });
  return rows.map(presentDeployment);
}
