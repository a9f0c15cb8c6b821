import type { FastifyPluginAsync } from 'fastify';
import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import { teamScope } from '../domain/access.js';
import { authOf, requireAuth } from './auth.js';
import { IdParams, authErrors, security } from './schemas.js';
import { ServiceStatusSchema, StatusList } from './session-schemas.js';
import type { SessionRegistry } from '../sessions/registry.js';
import { serviceStatus } from '../sessions/service-status.js';

export interface StatusRoutesOptions {
  prisma: Db;
  registry: SessionRegistry;
}

const serviceSelect = {
  id: true,
  name: true,
  teamId: true,
  replicas: true,
  node: { select: { id: true, name: true, unreachableSince: true, lastTeardownReason: true } },
} as const;

/** Desired vs running replicas, from live sessions only, each with its evidence. */
export const statusRoutes: FastifyPluginAsync<StatusRoutesOptions> = async (app, opts) => {
  app.get(
    '/status',
    {
      onRequest: requireAuth,
      schema: {
        tags: ['status'],
        summary: 'Status of every service the token may see (decommissioned nodes excluded)',
        security,
        response: { 200: StatusList, ...authErrors() },
      },
    },
    async (request) => {
      const services = await opts.prisma.service.findMany({
        where: { node: { decommissioned: false }, ...teamScope(authOf(request)) },
        orderBy: [{ teamId: 'asc' }, { name: 'asc' }],
        select: serviceSelect,
      });
      const now = Date.now();
      return { services: services.map((s) => serviceStatus(s, opts.registry, now)) };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/services/:id/status',
    {
      onRequest: requireAuth,
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
      if (service.node.decommissioned) {
        throw new AppError('NOT_FOUND', `service ${service.name} left status: its node ${service.node.name} is decommissioned`);
      }
      return serviceStatus(service, opts.registry);
    },
  );
};
