import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Nullable } from '@tether/common';
import Type from 'typebox';
import { auditOf } from './audit-context.js';
import { requireOperator } from './auth.js';
import { authErrors, IdParams, labelName, NullableTimestamp, security, Timestamp } from './schemas.js';
import type { ApiDeps } from '../domain/api-deps.js';
import { createNode, decommissionNode, getNode, listNodes } from '../domain/nodes.js';

// Only what the database knows. Reachability is not a column: it comes from
// the live session registry, which adds its own fields to these answers.
export const NodeSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  decommissioned: Type.Boolean(),
  decommissionedAt: NullableTimestamp,
  createdAt: Timestamp,
  lastSeenAt: Nullable(Timestamp, {
    description: 'last inbound frame as last flushed to the database; history, not evidence of reachability',
  }),
  services: Type.Integer({ description: 'services placed on the node' }),
});

/** Nodes (app hosts): operators only. */
export const nodeRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  app.post(
    '/nodes',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['nodes'],
        summary: 'Register a node; answers its agent token, shown once (operators)',
        security,
        body: Type.Object({ name: labelName() }, { additionalProperties: false }),
        response: {
          201: Type.Object({ id: Type.String(), name: Type.String(), token: Type.String({ description: 'the agent token (TETHER_NODE_TOKEN)' }) }),
          ...authErrors(403, 409),
        },
      },
    },
    async (request, reply) => reply.status(201).send(await createNode(deps.prisma, request.body.name, auditOf(request))),
  );

  app.get(
    '/nodes',
    {
      onRequest: requireOperator,
      schema: { tags: ['nodes'], summary: 'List nodes (operators)', security, response: { 200: Type.Array(NodeSchema), ...authErrors(403) } },
    },
    async () => listNodes(deps.prisma),
  );

  app.get(
    '/nodes/:id',
    {
      onRequest: requireOperator,
      schema: { tags: ['nodes'], summary: 'Read a node (operators)', security, params: IdParams, response: { 200: NodeSchema, ...authErrors(403, 404) } },
    },
    async (request) => getNode(deps.prisma, request.params.id),
  );

  app.delete(
    '/nodes/:id',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['nodes'],
        summary: 'Decommission a node (operators): its agent is refused from now on, its pending deployments fail',
        security,
        params: IdParams,
        response: { 200: NodeSchema, ...authErrors(403, 404) },
      },
    },
    async (request) => decommissionNode(deps, request.params.id, auditOf(request)),
  );
};
