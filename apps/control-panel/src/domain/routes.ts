import { recordChange, type AuditContext } from '../audit/audit-entry.js';
import { isReservedHost, RESERVED_HOST_SUFFIX } from '@tether/protocol';
import { AppError } from '../errors.js';
import type { Route } from '../generated/prisma/client.js';
import { teamScope, type AuthContext } from './access.js';
import { assertDomain } from './host-names.js';
import { lockService, mapPrismaError } from '../db/prisma-helpers.js';
import type { ApiDeps } from './api-deps.js';

// Routes attach a domain (optionally narrowed to a path prefix) to a service.
// A domain is attached to at most one service across all teams.

export const presentRoute = (r: Route) => ({
  id: r.id,
  domain: r.domain,
  pathPrefix: r.pathPrefix,
  serviceId: r.serviceId,
  createdAt: r.createdAt.toISOString(),
});

const notFound = () => new AppError('NOT_FOUND', 'no such route');
const serviceNotFound = () => new AppError('NOT_FOUND', 'no such service');
const noPort = (service: string) =>
  new AppError('SERVICE_HAS_NO_PORT', `service ${service} has no internalPort, so a route cannot reach it: set one with PATCH first`);
const domainTaken = (domain: string) => new AppError('DOMAIN_TAKEN', `${domain} is already attached to a service`);

export async function attachRoute(
  { prisma, events }: ApiDeps,
  auth: AuthContext,
  input: { domain: string; serviceId: string; pathPrefix?: string },
  audit?: AuditContext,
) {
  const domain = assertDomain(input.domain);
  // The agents' canary answers under this suffix on every host; a customer route there would be confusing at best.
  if (isReservedHost(domain)) throw new AppError('RESERVED_DOMAIN', `${domain} is reserved for Tether's own use (${RESERVED_HOST_SUFFIX} and names under it)`);
  const { route, nodeId } = await prisma.$transaction(async (tx) => {
    const visible = await tx.service.findFirst({ where: { id: input.serviceId, ...teamScope(auth) }, select: { id: true } });
    // FOR SHARE: a concurrent move of the service waits, so nodeId below is where the route really points.
    if (!visible || !(await lockService(tx, input.serviceId, 'share'))) throw serviceNotFound();
    const { nodeId, name, internalPort, teamId } = await tx.service.findUniqueOrThrow({
      where: { id: input.serviceId },
      select: { nodeId: true, name: true, internalPort: true, teamId: true },
    });
    let route;
    try {
      route = await tx.route.create({ data: { domain, pathPrefix: input.pathPrefix ?? null, serviceId: input.serviceId } });
    } catch (err) {
      mapPrismaError(err, { P2002: domainTaken(domain) });
    }
    await recordChange(tx, audit, { action: 'route.create', targetType: 'route', targetId: route.id, teamId });
    // After the insert, so a taken domain is named first; throwing rolls the insert back.
    // A route without a port would be accepted and never reach anything: no upstream, no map entry.
    if (internalPort === null) throw noPort(name);
    return { route, nodeId };
  });
  events.emit('routing.changed', { nodeIds: [nodeId], reason: `attached ${domain}${route.pathPrefix ?? ''}` });
  return presentRoute(route);
}

export async function listRoutes({ prisma }: ApiDeps, auth: AuthContext, filter: { serviceId?: string }) {
  const rows = await prisma.route.findMany({
    where: { service: teamScope(auth), ...(filter.serviceId ? { serviceId: filter.serviceId } : {}) },
    orderBy: [{ domain: 'asc' }],
  });
  return rows.map(presentRoute);
}

export async function getRoute({ prisma }: ApiDeps, auth: AuthContext, id: string) {
  const route = await prisma.route.findFirst({ where: { id, service: teamScope(auth) } });
  if (!route) throw notFound();
  return presentRoute(route);
}

export async function detachRoute({ prisma, events }: ApiDeps, auth: AuthContext, id: string, audit?: AuditContext): Promise<void> {
  const { route, nodeId } = await prisma.$transaction(async (tx) => {
    const found = await tx.route.findFirst({ where: { id, service: teamScope(auth) } });
    if (!found || !(await lockService(tx, found.serviceId, 'share'))) throw notFound();
    const { nodeId, teamId } = await tx.service.findUniqueOrThrow({ where: { id: found.serviceId }, select: { nodeId: true, teamId: true } });
    try {
      await tx.route.delete({ where: { id } });
    } catch (err) {
      // Detached (or its service deleted) by a concurrent request.
      mapPrismaError(err, { P2025: notFound() });
    }
    await recordChange(tx, audit, { action: 'route.delete', targetType: 'route', targetId: id, teamId });
    return { route: found, nodeId };
  });
  events.emit('routing.changed', { nodeIds: [nodeId], reason: `detached ${route.domain}${route.pathPrefix ?? ''}` });
}
