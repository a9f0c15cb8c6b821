import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Nullable } from '@tether/common';
import Type from 'typebox';
import { auditOf } from './audit-context.js';
import { requireOperator } from './auth.js';
import { authErrors, IdParams, labelName, NodeLabels, NodeLabelsPatch, NullableTimestamp, security, Timestamp } from './schemas.js';
import type { ApiDeps } from '../domain/api-deps.js';
import { createNode, decommissionNode, evacuateNode, getNode, listNodes, setCordon, updateNode } from '../domain/nodes.js';
import { evacuationAnswerIn } from '../cluster/scheduler-loop.js';

// Only what the database knows. Reachability is not a column: it comes from
// the live session registry, which adds its own fields to these answers.
export const NodeSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  labels: Type.Record(Type.String(), Type.String(), { description: 'what a service\'s placement may require' }),
  cordoned: Type.Boolean({ description: 'nothing new is placed on it; what runs there keeps running and deploying' }),
  evacuating: Type.Boolean({ description: 'cordoned and being emptied: the scheduler moves its replicas away one at a time (uncordon ends it)' }),
  decommissioned: Type.Boolean(),
  decommissionedAt: NullableTimestamp,
  createdAt: Timestamp,
  lastSeenAt: Nullable(Timestamp, {
    description: 'last inbound frame as last flushed to the database; history, not evidence of reachability',
  }),
  services: Type.Integer({ description: 'services placed on the node' }),
});

const ServiceRef = { serviceId: Type.String(), serviceName: Type.String() };
export const EvacuationSchema = Type.Object({
  node: NodeSchema,
  moves: Type.Array(
    Type.Object({ ...ServiceRef, allocationId: Type.String(), from: Type.String(), to: Type.String({ description: 'where it would go with the loads of now' }) }),
    { description: 'replicas that move, one at a time: each new one healthy before the old one drains' },
  ),
  refused: Type.Array(
    Type.Object({
      ...ServiceRef,
      allocationId: Nullable(Type.String()),
      code: Type.String({ description: 'STATEFUL_SERVICE_PINNED, SERVICE_PINNED_TO_NODE or NOT_MANAGED_BY_ALLOCATIONS' }),
      message: Type.String(),
    }),
    { description: 'replicas that stay, and why' },
  ),
  pending: Type.Array(
    Type.Object({ ...ServiceRef, count: Type.Integer(), code: Type.String({ description: 'NO_NODE_AVAILABLE or NO_NODE_MATCHES_LABELS' }) }),
    { description: 'replicas with nowhere to go now: they stay until a node becomes eligible' },
  ),
});

export interface NodeRouteDeps extends ApiDeps {
  /** Whether this panel holds a live session of the node (the scheduler's liveness reads it too). */
  holdsSession?: (nodeId: string) => boolean;
}

/** Nodes (app hosts): operators only. */
export const nodeRoutes: FastifyPluginAsyncTypebox<NodeRouteDeps> = async (app, deps) => {
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
      // tether.io/ingress makes a node serve every routed service managed by allocations (issue 37).
      deps.events.emit('routing.changed', { nodeIds: [node.id], reason: `node ${node.name} labels changed` });
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

  app.post(
    '/nodes/:id/evacuate',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['nodes'],
        summary:
          "Evacuate a node (operators): cordons it; the scheduler moves its replicas to other nodes one at a time, each new one healthy before the old one drains. Stateful and pinned services stay and say why; uncordon ends it, nothing moves back",
        security,
        params: IdParams,
        response: { 200: EvacuationSchema, ...authErrors(403, 404, 409) },
      },
    },
    async (request) => {
      const holds = deps.holdsSession ?? (() => false);
      // The answer is read in the evacuation's own transaction: the state the scheduler acts on once it commits.
      const { node, answer } = await evacuateNode(deps.prisma, request.params.id, auditOf(request), (tx) => evacuationAnswerIn(tx, request.params.id, holds));
      deps.events.emit('scheduler.nudge', { reason: `node ${node.name} evacuated`, nodeId: node.id });
      return { node, ...answer };
    },
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
