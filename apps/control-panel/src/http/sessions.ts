import type { FastifyPluginAsync } from 'fastify';
import Type from 'typebox';
import type { Db } from '../db/database.js';
import { FROM_MEMORY_HEADER } from '../db/last-good-read.js';
import { AppError } from '../errors.js';
import { requireOperator } from './auth.js';
import { IdParams, authErrors, security } from './schemas.js';
import { SessionHistory, SessionList } from './session-schemas.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { RoutingView } from '../routing/routing-reconciler.js';
import { sessionRow, type MissedAcks24h } from './session-rows.js';
import { seenNode } from '../node-health/node-directory.js';
import { clusterProof, factsOf, type HealthSources, type NodeFacts } from '../node-health/node-health.js';
import type { ClusterView } from '../sessions/remote-report.js';

export interface SessionRoutesOptions {
  prisma: Db;
  registry: SessionRegistry;
  /** Desired vs applied routing and reload counters per node. */
  routing: RoutingView;
  /** ACK timeouts per node in the last 24 h (the fleet directory's count of session events). */
  missedAcks24h: MissedAcks24h;
  /** Every node, by name, read now; the last good read while the database is out (node-health/node-directory.ts). */
  nodes: { read(): Promise<{ data: NodeFacts[]; fromMemoryAt: Date | null }> };
  /** Several panels: other panels' reports and this panel's lease (cluster/cluster.ts). */
  cluster?: { view(nodeIds: readonly string[], options?: { containers?: boolean }): Promise<ClusterView> };
}

const HistoryQuery = Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })) }, { additionalProperties: false });

/** Session health for dashboards (operators only). */
export const sessionRoutes: FastifyPluginAsync<SessionRoutesOptions> = async (app, opts) => {
  const sources = (view: ClusterView | undefined): HealthSources => ({ registry: opts.registry, ...(view ? { cluster: clusterProof(view) } : {}) });
  app.get(
    '/sessions',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['sessions'],
        summary: 'Session health: one row per node, from the in-memory connected map',
        security,
        response: { 200: SessionList, ...authErrors(403) },
      },
    },
    async (_request, reply) => {
      const { data, fromMemoryAt } = await opts.nodes.read();
      let nodes = data;
      if (fromMemoryAt) {
        // The database is out: node rows as last read, live sessions from the connected map (a node made since has one too).
        void reply.header(FROM_MEMORY_HEADER, fromMemoryAt.toISOString());
        const known = new Set(nodes.map((n) => n.id));
        const added = opts.registry
          .list()
          .filter((s) => !known.has(s.nodeId))
          .map((s) => seenNode(s.nodeId, s.nodeName));
        if (added.length > 0) nodes = [...nodes, ...added].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      }
      const view = await opts.cluster?.view(nodes.filter((n) => !n.decommissioned && !opts.registry.get(n.id)).map((n) => n.id));
      const now = Date.now();
      const src = sources(view);
      return { sessions: nodes.map((node) => sessionRow(node, src, opts.routing, now, opts.missedAcks24h)) };
    },
  );

  app.get<{ Params: { id: string }; Querystring: { limit?: number } }>(
    '/nodes/:id/sessions',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['sessions'],
        summary: 'Session history of one node (opened and closed events, newest first) and its current session',
        security,
        params: IdParams,
        querystring: HistoryQuery,
        response: { 200: SessionHistory, ...authErrors(403, 404) },
      },
    },
    async (request) => {
      const node = await opts.prisma.node.findUnique({ where: { id: request.params.id } });
      if (!node) throw new AppError('NOT_FOUND', `no node ${request.params.id}`);
      const events = await opts.prisma.sessionEvent.findMany({
        where: { nodeId: node.id },
        orderBy: [{ at: 'desc' }, { id: 'desc' }],
        take: request.query.limit ?? 100,
      });
      const view = await opts.cluster?.view(opts.registry.get(node.id) ? [] : [node.id]);
      return {
        current: sessionRow(factsOf(node), sources(view), opts.routing, Date.now(), opts.missedAcks24h),
        events: events.map((e) => ({ sessionId: e.sessionId, kind: e.kind, at: e.at.toISOString(), reason: e.reason, closeCode: e.closeCode })),
      };
    },
  );
};
