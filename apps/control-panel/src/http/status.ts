import type { FastifyPluginAsync } from 'fastify';
import { healthOf, type Db } from '../db/database.js';
import { FROM_MEMORY_HEADER, LastGoodRead } from '../db/last-good-read.js';
import { AppError } from '../errors.js';
import { teamScope } from '../domain/access.js';
import { authOf } from './auth.js';
import { IdParams, authErrors, security } from './schemas.js';
import { ServiceStatusSchema, StatusList } from './session-schemas.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { ClusterView } from '../sessions/remote-report.js';
import { serviceStatus, STATUS_SERVICE_SELECT as serviceSelect, type StatusInput } from '../status/service-status.js';
import type { LeftOutLookup } from '../status/replica-status.js';

export interface StatusRoutesOptions {
  prisma: Db;
  registry: SessionRegistry;
  /** Several panels: other panels' reports and this panel's lease (cluster/cluster.ts). */
  cluster?: { view(nodeIds: readonly string[], options?: { containers?: boolean }): Promise<ClusterView> };
  /** What this panel's last `allocations` set to a node left out (dispatch/allocation-sync.ts); absent: nothing. */
  leftOut?: LeftOutLookup;
}

/** Every node a service's status reads: its home node and its allocations' nodes. */
const nodesOf = (s: StatusInput): string[] => [...(s.node ? [s.node.id] : []), ...(s.allocations ?? []).map((a) => a.nodeId)];

/** Desired vs running replicas and the routes' health, from live sessions only, each with its evidence. */
export const statusRoutes: FastifyPluginAsync<StatusRoutesOptions> = async (app, opts) => {
  const lastRead = new Map<string, LastGoodRead<StatusInput[]>>();
  app.get(
    '/status',
    {
      schema: {
        tags: ['status'],
        summary: 'Status of every service the token may see (decommissioned nodes excluded)',
        security,
        response: { 200: StatusList, ...authErrors() },
      },
    },
    async (request, reply) => {
      const auth = authOf(request);
      // Remembered per scope (all, or one team) so status answers during a database outage; live state is from sessions.
      const scope = auth.role === 'operator' ? '*' : (auth.teamId ?? '');
      let read = lastRead.get(scope);
      if (!read) {
        read = new LastGoodRead(() =>
          opts.prisma.service.findMany({
            // A service without a home yet is listed (its replicas pending); one on a decommissioned node is not.
            where: { OR: [{ nodeId: null }, { node: { decommissioned: false } }], ...teamScope(auth) },
            orderBy: [{ teamId: 'asc' }, { name: 'asc' }],
            select: serviceSelect,
          }),
          healthOf(opts.prisma),
        );
        lastRead.set(scope, read);
      }
      const { data: services, fromMemoryAt } = await read.read();
      if (fromMemoryAt) void reply.header(FROM_MEMORY_HEADER, fromMemoryAt.toISOString());
      const view = await opts.cluster?.view([...new Set(services.flatMap(nodesOf))].filter((id) => !opts.registry.get(id)), { containers: true });
      const now = Date.now();
      return { services: services.map((s) => serviceStatus(s, opts.registry, now, view, opts.leftOut)) };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/services/:id/status',
    {
      schema: {
        tags: ['status'],
        summary: 'Status of one service, with the session and frame age that prove it',
        security,
        params: IdParams,
        response: { 200: ServiceStatusSchema, ...authErrors(404) },
      },
    },
    async (request) => {
      const service = await opts.prisma.service.findFirst({
        where: { id: request.params.id, ...teamScope(authOf(request)) },
        select: { ...serviceSelect, node: { select: { ...serviceSelect.node.select, decommissioned: true } } },
      });
      if (!service) throw new AppError('NOT_FOUND', `no service ${request.params.id}`);
      if (service.node?.decommissioned) {
        throw new AppError('NOT_FOUND', `service ${service.name} left status: its node ${service.node.name} is decommissioned`);
      }
      const view = await opts.cluster?.view([...new Set(nodesOf(service))].filter((id) => !opts.registry.get(id)), { containers: true });
      return serviceStatus(service, opts.registry, Date.now(), view, opts.leftOut);
    },
  );
};
