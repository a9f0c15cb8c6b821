import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Nullable } from '@tether/common';
import Type from 'typebox';
import { auditOf } from './audit-context.js';
import { requireOperator } from './auth.js';
import { authErrors, IdParams, labelName, NodeLabels, NodeLabelsPatch, NullableTimestamp, security, Timestamp } from './schemas.js';
import type { ApiDeps } from '../domain/api-deps.js';
import { createNode, decommissionNode, getNode, listNodes, setCordon, updateNode } from '../domain/nodes.js';

// Only what the database knows. Reachability is not a column: it comes from
// the live session registry, which adds its own fields to these answers.
export const NodeSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  labels: Type.Record(Type.String(), Type.String(), { description: 'what a service\'s placement may require' }),
  cordoned: Type.Boolean({ description: 'nothing new is placed on it; what runs there keeps running and deploying' }),
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
        body: Type.Object(
          { name: labelName(), labels: Type.Optional(NodeLabels()) },
          { additionalProperties: false },
        ),
        response: {
          201: Type.Object({ id: Type.String(), name: Type.String(), token: Type.String({ description: 'the agent token (TETHER_NODE_TOKEN)' }) }),
          ...authErrors(403, 409),
        },
      },
    },
    async (request, reply) => reply.status(201).send(await createNode(deps.prisma, request.body, auditOf(request))),
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

  app.patch(
    '/nodes/:id',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['nodes'],
        summary: "Change a node's labels (operators): a string sets a label, null removes it, others are kept",
        security,
        params: IdParams,
        body: Type.Object(
          { labels: Type.Optional(NodeLabelsPatch()) },
          { additionalProperties: false },
        ),
        response: { 200: NodeSchema, ...authErrors(403, 404) },
      },
    },
    async (request) => {
      const node = await updateNode(deps.prisma, request.params.id, request.body, auditOf(request));
      deps.events.emit('scheduler.nudge', { reason: `node ${node.name} updated`, nodeId: node.id });
      return node;
    },
  );

  for (const [verb, cordoned, summary] of [
    ['cordon', true, 'Cordon a node (operators): nothing new is placed on it; what runs there keeps running and deploying'],
    ['uncordon', false, 'Lift a cordon (operators): the node takes new placements again; nothing moves back by itself'],
  ] as const) {
    app.post(
      `/nodes/:id/${verb}`,
      {
        onRequest: requireOperator,
        schema: { tags: ['nodes'], summary, security, params: IdParams, response: { 200: NodeSchema, ...authErrors(403, 404, 409) } },
      },
      async (request) => {
        const node = await setCordon(deps.prisma, request.params.id, cordoned, auditOf(request));
        // The scheduler places around a cordon (issue 36); labels change placements too (below).
        deps.events.emit('scheduler.nudge', { reason: `node ${node.name} ${verb}ed`, nodeId: node.id });
        return node;
      },
    );
  }

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
