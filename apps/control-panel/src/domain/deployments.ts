import { errorMessage, sanitizeText, truncate } from '@tether/common';
import type { Workload } from '@tether/protocol';
import { AppError } from '../errors.js';
import type { Deployment } from '../generated/prisma/client.js';
import { teamScope, type AuthContext } from './access.js';
import { lockNodeShared, toIso } from '../db/prisma-helpers.js';
import type { ApiDeps } from './api-deps.js';
import { specOf, type ServiceSpec } from './services.js';

// A deployment carries out a snapshot of its service's spec on the service's
// node. The row is committed (status pending) before it is dispatched, so a
// crash between the two leaves a visible pending row, never a lost request.

export const presentDeployment = (d: Deployment) => ({
  id: d.id,
  serviceId: d.serviceId,
  nodeId: d.nodeId,
  spec: d.spec as unknown as ServiceSpec,
  status: d.status,
  reason: d.reason,
  sessionId: d.sessionId,
  createdAt: d.createdAt.toISOString(),
  dispatchedAt: toIso(d.dispatchedAt),
  ackedAt: toIso(d.ackedAt),
  finishedAt: toIso(d.finishedAt),
});

/** What the agent is sent for a deployment of a service's spec snapshot. */
export function workloadOf(serviceId: string, deploymentId: string, spec: ServiceSpec): Workload {
  return { serviceId, serviceName: spec.name, deploymentId, image: spec.image, env: spec.env, port: spec.internalPort, replicas: spec.replicas };
}

const notFound = () => new AppError('NOT_FOUND', 'no such deployment');

/**
 * Records a deployment of the service's current spec and hands it to the
 * dispatcher. A service on a decommissioned node is refused with
 * NODE_DECOMMISSIONED and no row is created (the node row is locked FOR SHARE
 * while the deployment is inserted, so a decommission cannot slip between).
 */
export async function createDeployment({ prisma, dispatcher }: ApiDeps, auth: AuthContext, serviceId: string) {
  const { deployment, nodeName, spec } = await prisma.$transaction(async (tx) => {
    const service = await tx.service.findFirst({ where: { id: serviceId, ...teamScope(auth) }, include: { node: { select: { name: true } } } });
    if (!service) throw new AppError('NOT_FOUND', 'no such service');
    const node = await lockNodeShared(tx, service.nodeId);
    if (!node || node.decommissioned) {
      throw new AppError('NODE_DECOMMISSIONED', `node ${service.node.name} is decommissioned; move the service to another node first`);
    }
    const spec = specOf(service);
    const deployment = await tx.deployment.create({ data: { serviceId, nodeId: service.nodeId, spec: { ...spec }, status: 'pending' } });
    return { deployment, nodeName: service.node.name, spec };
  });

  const workload = workloadOf(serviceId, deployment.id, spec);
  let outcome;
  try {
    outcome = await dispatcher.dispatch({ deploymentId: deployment.id, nodeId: deployment.nodeId, nodeName, workload });
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
