import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import type { LogRelay } from '../log-streams/log-relay.js';
import type { SessionRegistry } from '../sessions/registry.js';
import { requirePanel, type PanelVerifier } from './internal-auth.js';
import { homeOf, logRequestOf, LogQuery, serveLocalLogs } from './logs.js';
import { IdParams } from './schemas.js';

// GET /internal/v1/services/:id/logs: the stream of a node whose session this
// panel holds, for another panel that passes it on to its customer (that
// panel checked the customer's token and team). The same relay, credit and
// answers as GET /v1/services/:id/logs; never passed on again (no loops): a
// node not held here is 503 NODE_UNREACHABLE.

export interface InternalLogOptions {
  prisma: Db;
  registry: SessionRegistry;
  relay: LogRelay;
  verifier: PanelVerifier;
  followIdleMs: number;
}

export const internalLogRoutes: FastifyPluginAsyncTypebox<InternalLogOptions> = async (app, { prisma, registry, relay, verifier, followIdleMs }) => {
  app.get(
    '/services/:id/logs',
    { onRequest: requirePanel(verifier), schema: { hide: true, params: IdParams, querystring: LogQuery } },
    async (request, reply) => {
      const service = await prisma.service.findUnique({ where: { id: request.params.id }, select: { id: true, teamId: true, nodeId: true, node: { select: { name: true } } } });
      if (!service) throw new AppError('NOT_FOUND', 'no such service');
      const logRequest = logRequestOf(service.id, request.query);
      const node = homeOf(service);
      const session = registry.get(node.id);
      if (!session) throw new AppError('NODE_UNREACHABLE', `node ${node.name} has no live session; its logs are unreachable until it rejoins`);
      serveLocalLogs(reply, relay, session, node.name, logRequest, { teamId: service.teamId, followIdleMs });
    },
  );
};
