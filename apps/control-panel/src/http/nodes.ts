import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Nullable } from '@tether/common';
import Type from 'typebox';
import { auditOf } from './audit-context.js';
import { requireOperator } from './auth.js';
import { authErrors, IdParams, labelName, NodeLabels, NodeLabelsPatch, NullableTimestamp, security, Timestamp } from './schemas.js';
import type { ApiDeps } from '../domain/api-deps.js';
import { createNode, decommissionNode, evacuateNode, getNode, listNodes, setCordon, updateNode } from '../domain/nodes.js';
import { evacuationAnswerIn } from '../cluster/evacuation-answer.js';
import { declareNodeLost } from '../domain/node-lost.js';
import { AppError } from '../errors.js';

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
  lostAt: Nullable(Timestamp, { description: 'when an operator declared its host gone (POST /v1/nodes/:id/lost); null: never' }),
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

export const LostSchema = Type.Object({
  node: NodeSchema,
  moved: Type.Array(
    Type.Object({
      ...ServiceRef,
      from: Type.String(),
      to: Type.String({ description: 'its new home; the scheduler places its replicas (a stateful one there) at once' }),
      emptyVolumes: Type.Array(Type.Object({ name: Type.String(), mountPath: Type.String() }), {
        description: "its volumes, made anew and empty on the new node: their data is on the lost host; restore it from the operator's backup",
      }),
    }),
    { description: 'services whose home was the lost node, moved now (a later call lists only what it moves then)' },
  ),
  pending: Type.Array(
    Type.Object({ ...ServiceRef, code: Type.String({ description: 'NO_NODE_AVAILABLE or NO_NODE_MATCHES_LABELS' }), message: Type.String() }),
    { description: 'services with nowhere to go: they stay homed on the lost node (declare it lost again once a node fits, or change their placement)' },
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

  app.post(
    '/nodes/:id/lost',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['nodes'],
        summary:
          "Declare a node's host gone (operators; body {\"confirm\": true}): decommissions it and moves every service homed there to another node its placement allows, stateful ones on empty volumes. Idempotent",
        security,
        params: IdParams,
        body: Type.Optional(Type.Object({ confirm: Type.Optional(Type.Boolean({ description: 'must be true: the move cannot be undone' })) }, { additionalProperties: false })),
        response: { 200: LostSchema, ...authErrors(400, 403, 404) },
      },
    },
    async (request) => {
      if (request.body?.confirm !== true) {
        throw new AppError('CONFIRMATION_REQUIRED', 'declaring a node lost decommissions it and starts its stateful services on empty volumes elsewhere: send {"confirm": true}');
      }
      return declareNodeLost(deps, request.params.id, deps.holdsSession ?? (() => false), auditOf(request));
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
