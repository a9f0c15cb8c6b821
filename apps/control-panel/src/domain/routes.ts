import { recordChange, type AuditContext } from '../audit/audit-entry.js';
import { isReservedHost, isStaticRouteShape, normalizePathPrefix, RESERVED_HOST_SUFFIX, STATIC_ROUTE_SHAPE } from '@tether/protocol';
import { AppError } from '../errors.js';
import type { Route } from '../generated/prisma/client.js';
import { teamScope, type AuthContext } from './access.js';
import { assertDomain } from './host-names.js';
import { lockService, mapPrismaError } from '../db/prisma-helpers.js';
import type { ApiDeps } from './api-deps.js';
import { claimDomain, releaseDomainIfUnused } from './domain-claims.js';
import type { RouteNode } from '../status/route-health.js';
import { routeServing } from '../status/route-serving.js';
import { routingNodeIds, servingNodes, type ServingNodeRow } from '../routing/serving-nodes.js';
import { sqlOf } from '../db/database.js';

// Routes attach a domain (optionally narrowed to a path prefix) to a service:
// one route per (domain, path prefix), and a domain belongs to one team
// (domain-claims.ts); every node serving the service serves the route
// (routing/serving-nodes.ts). Routes have the shape the static proxy serves without
// a config change (docs/api.md, "Routes"); older stored forms are migrated
// (prisma/migrations/20261203070000_route_shapes).

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
const domainTaken = (domain: string, pathPrefix: string | null) =>
  new AppError('DOMAIN_TAKEN', pathPrefix === null ? `${domain} is already attached to a service` : `${domain}${pathPrefix} is already attached to a service`);
const shapeUnsupported = (domain: string, pathPrefix: string | null) =>
  new AppError(
    'ROUTE_SHAPE_UNSUPPORTED',
    `${domain}${pathPrefix ?? ''}: a route is the whole domain (no pathPrefix, or /) or a path prefix of 1 to ${STATIC_ROUTE_SHAPE.maxSegments} segments ` +
      `${STATIC_ROUTE_SHAPE.segmentPattern} (/api, /api/v1), and the domain with its segments (each 2 characters more) at most ${STATIC_ROUTE_SHAPE.maxNameLength} characters`,
  );

export async function attachRoute(
  { prisma, events }: ApiDeps,
  auth: AuthContext,
  input: { domain: string; serviceId: string; pathPrefix?: string },
  audit?: AuditContext,
) {
  const domain = assertDomain(input.domain);
  // The agents' canary answers under this suffix on every host; a customer route there would be confusing at best.
  if (isReservedHost(domain)) throw new AppError('RESERVED_DOMAIN', `${domain} is reserved for Tether's own use (${RESERVED_HOST_SUFFIX} and names under it)`);
  // Stored in its one form: `/` is the whole domain, a trailing `/` goes, letters are lowercased (matching is without case).
  const pathPrefix = normalizePathPrefix(input.pathPrefix);
  if (!isStaticRouteShape({ domain, pathPrefix })) throw shapeUnsupported(domain, pathPrefix);
  const { route, nodeId } = await prisma.$transaction(async (tx) => {
    const visible = await tx.service.findFirst({ where: { id: input.serviceId, ...teamScope(auth) }, select: { id: true } });
    // FOR SHARE: a concurrent move of the service waits, so nodeId below is where the route really points.
    if (!visible || !(await lockService(tx, input.serviceId, 'share'))) throw serviceNotFound();
    const { nodeId, name, internalPort, teamId } = await tx.service.findUniqueOrThrow({
      where: { id: input.serviceId },
      select: { nodeId: true, name: true, internalPort: true, teamId: true },
    });
    // A domain is served from its service's node: a service without one yet (its replicas pending) takes none.
    if (nodeId === null) throw new AppError('SERVICE_PENDING', `service ${name} has no node yet (its replicas are pending): attach routes once it is placed`);
    // The domain's row, locked: from here on no other attach on this domain runs until this one commits.
    await claimDomain(tx, domain, { teamId, nodeId });
    // Unique (domain, path_prefix) cannot see two NULL prefixes as equal; under the lock a read can.
    if (await tx.route.findFirst({ where: { domain, pathPrefix }, select: { id: true } })) throw domainTaken(domain, pathPrefix);
    let route;
    try {
      route = await tx.route.create({ data: { domain, pathPrefix, serviceId: input.serviceId } });
    } catch (err) {
      mapPrismaError(err, { P2002: domainTaken(domain, pathPrefix) });
    }
    await recordChange(tx, audit, { action: 'route.create', targetType: 'route', targetId: route.id, teamId });
    // After the insert, so a taken domain is named first; throwing rolls the insert back.
    // A route without a port would be accepted and never reach anything: no upstream, no map entry.
    if (internalPort === null) throw noPort(name);
    return { route, nodeId };
  });
  events.emit('routing.changed', { nodeIds: await routingNodeIds(sqlOf(prisma), route.serviceId, nodeId), reason: `attached ${domain}${route.pathPrefix ?? ''}` });
  return presentRoute(route);
}

const withNode = { service: { select: { node: { select: { id: true, name: true } } } } } as const;
type RouteWithNode = Route & { service: { node: RouteNode | null } };

/** Routes as read, each with the nodes serving it and its health from their live sessions (status/route-serving.ts). */
async function presentWithHealth(deps: ApiDeps, rows: RouteWithNode[]) {
  const serving = await servingNodes(sqlOf(deps.prisma), [...new Set(rows.map((r) => r.serviceId))]);
  const byService = new Map<string, ServingNodeRow[]>();
  for (const s of serving) byService.set(s.service_id, [...(byService.get(s.service_id) ?? []), s]);
  const nodes = [...new Map([...rows.flatMap((r) => (r.service.node ? [[r.service.node.id, r.service.node] as const] : [])), ...serving.map((s) => [s.node_id, { id: s.node_id, name: s.node_name }] as const)]).values()];
  const live = deps.liveRouting ? await deps.liveRouting(nodes) : () => ({ why: 'route health is not read by this panel' });
  const now = Date.now();
  return rows.map((r) => ({ ...presentRoute(r), ...routeServing(r, r.service.node, byService.get(r.serviceId) ?? [], live, now) }));
}

export async function listRoutes(deps: ApiDeps, auth: AuthContext, filter: { serviceId?: string }) {
  const rows = await deps.prisma.route.findMany({
    where: { service: teamScope(auth), ...(filter.serviceId ? { serviceId: filter.serviceId } : {}) },
    orderBy: [{ domain: 'asc' }],
    include: withNode,
  });
  return presentWithHealth(deps, rows);
}

export async function getRoute(deps: ApiDeps, auth: AuthContext, id: string) {
  const route = await deps.prisma.route.findFirst({ where: { id, service: teamScope(auth) }, include: withNode });
  if (!route) throw notFound();
  return (await presentWithHealth(deps, [route]))[0]!;
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
    await releaseDomainIfUnused(tx, found.domain);
    await recordChange(tx, audit, { action: 'route.delete', targetType: 'route', targetId: id, teamId });
    return { route: found, nodeId };
  });
  events.emit('routing.changed', { nodeIds: await routingNodeIds(sqlOf(prisma), route.serviceId, nodeId), reason: `detached ${route.domain}${route.pathPrefix ?? ''}` });
}
