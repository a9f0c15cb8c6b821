import type { FastifyPluginAsync } from 'fastify';
import { Nullable } from '@tether/common';
import { CanaryDropCounts, ReloadKindCounts } from '@tether/protocol';
import Type from 'typebox';
import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import { requireOperator } from './auth.js';
import { IdParams, NullableTimestamp, Timestamp, authErrors, security } from './schemas.js';
import type { RoutingView } from '../routing/routing-reconciler.js';

const NullableString = Nullable(Type.String());
const NullableInt = Nullable(Type.Integer());
const Counts = (keys: string[]) => Type.Object(Object.fromEntries(keys.map((k) => [k, Type.Integer()])));
// The counts' keys are the protocol's (declared once there, presented here as the agent reported them).
const KindCounts = Nullable(ReloadKindCounts);
const CauseCounts = CanaryDropCounts;
const Canary = Nullable(
  Type.Object({
    connected: Type.Boolean(),
    dropsToday: Type.Integer(),
    dropsTotal: Type.Integer(),
    causesTotal: CauseCounts,
    causesToday: CauseCounts,
    lastDropAt: NullableString,
    lastDropCause: NullableString,
    httpFailuresTotal: Type.Integer(),
  }),
);

const ReloadList = Type.Object({
  nodeId: Type.String(),
  routing: Type.Object({
    desiredHash: NullableString,
    appliedHash: NullableString,
    drifting: Type.Boolean(),
    reloadsToday: Type.Integer(),
    reloadsTotal: Type.Integer(),
    lastReloadAt: NullableTimestamp,
    lastReloadReason: NullableString,
    reloadKinds: KindCounts,
    canary: Canary,
    pushes: Counts(['sent', 'applied', 'failed']),
  }),
  reloads: Type.Array(Type.Object({ at: Timestamp, kind: Type.String(), hashBefore: NullableString, hashAfter: Type.String(), reason: Type.String() })),
});

const DropList = Type.Object({
  nodeId: Type.String(),
  canary: Canary,
  drops: Type.Array(
    Type.Object({ at: Timestamp, cause: Type.String(), reloadReason: NullableString, closeCode: NullableInt, reconnectMs: NullableInt }),
  ),
});

const Query = Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 50 })) }, { additionalProperties: false });

/** The proxy reloads of one node, newest first, with why each happened (operators). */
export const reloadRoutes: FastifyPluginAsync<{ prisma: Db; routing: RoutingView }> = async (app, opts) => {
  app.get<{ Params: { id: string }; Querystring: { limit?: number } }>(
    '/nodes/:id/reloads',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['sessions'],
        summary: 'Proxy reloads of a node (newest first) with their reasons, and desired vs applied routing',
        security,
        params: IdParams,
        querystring: Query,
        response: { 200: ReloadList, ...authErrors(403, 404) },
      },
    },
    async (request) => {
      const node = await opts.prisma.node.findUnique({ where: { id: request.params.id }, select: { id: true } });
      if (!node) throw new AppError('NOT_FOUND', `no node ${request.params.id}`);
      const rows = await opts.prisma.reloadEvent.findMany({
        where: { nodeId: node.id },
        orderBy: [{ at: 'desc' }, { id: 'desc' }],
        take: request.query.limit ?? 50,
      });
      return {
        nodeId: node.id,
        routing: opts.routing.forNode(node.id),
        reloads: rows.map((r) => ({ at: r.at.toISOString(), kind: r.kind, hashBefore: r.hashBefore, hashAfter: r.hashAfter, reason: r.reason })),
      };
    },
  );

  app.get<{ Params: { id: string }; Querystring: { limit?: number } }>(
    '/nodes/:id/canary-drops',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['sessions'],
        summary: "Drops of the node's canary connection through its own proxy (newest first), each with its cause",
        security,
        params: IdParams,
        querystring: Query,
        response: { 200: DropList, ...authErrors(403, 404) },
      },
    },
    async (request) => {
      const node = await opts.prisma.node.findUnique({ where: { id: request.params.id }, select: { id: true } });
      if (!node) throw new AppError('NOT_FOUND', `no node ${request.params.id}`);
      const rows = await opts.prisma.canaryDrop.findMany({
        where: { nodeId: node.id },
        orderBy: [{ at: 'desc' }, { id: 'desc' }],
        take: request.query.limit ?? 50,
      });
      return {
        nodeId: node.id,
        canary: opts.routing.forNode(node.id).canary,
        drops: rows.map((r) => ({ at: r.at.toISOString(), cause: r.cause, reloadReason: r.reloadReason, closeCode: r.closeCode, reconnectMs: r.reconnectMs })),
      };
    },
  );
};
