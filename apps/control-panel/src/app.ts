import type { FastifyInstance } from 'fastify';
import { recordRefusalsAndSignIns } from './http/audit-refusals.js';
import { withDeadline } from './db/db-faults.js';
import { primaryOf } from './db/database.js';
import { watchPrimary } from './db/primary-metrics.js';
import { authPlugin } from './http/auth.js';
import { installRateLimits } from './http/rate-limits.js';
import { Lifecycle } from './lifecycle.js';
import { createPanelHttp, installAnswerHeaders } from './panel-http.js';
import { createMetrics } from './panel-metrics.js';
import { createPanelParts, exposeParts, type AppDependencies } from './panel-parts.js';
import { registerAgentGateway } from './panel-gateway.js';
import { registerPanelRoutes } from './panel-routes.js';
import { panelStatus, type PanelStatus } from './panel-status.js';
import { loadKeyring } from './secrets/keyring.js';
import { ORPHANED_REASON } from './session-writes/facts.js';
import { watchFailover } from './cluster/failover-metrics.js';
import { watchOutbox } from './session-writes/outbox-metrics.js';

export { PANEL_VERSION } from './panel-http.js';

export type { AppDependencies } from './panel-parts.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** What can be observed of this panel's background parts (panel-status.ts). */
    panelStatus: PanelStatus;
  }
}

/**
 * The panel's background parts in start order; they stop in the reverse order (docs/architecture.md,
 * "Lifecycle"). Read bottom-up for the stop: requests answer 503 first; the internal listener closes; the
 * last token uses and the agent side's session closes reach the outbox before it drains; the lease is given
 * up only after (until the closes are written no other panel's sweep mistakes them for a crash); open event
 * streams end last.
 */
export const LIFECYCLE_ORDER = [
  'deployment-event-streams',
  'log-relay',
  'audit-retention',
  'agent-upgrades',
  'panel-lease',
  'session-facts',
  'cluster',
  'agent-side',
  'scheduler',
  'fleet',
  'deployment-changes',
  'token-last-used',
  'internal-listener',
  'requests',
] as const;

/**
 * Builds the panel's HTTP app from its dependencies: it makes the parts, declares their lifecycle and
 * registers the routes. Nothing here reads the environment or listens.
 */
export async function buildApp(deps: AppDependencies): Promise<FastifyInstance> {
  const { config } = deps;
  const { db } = config;
  const keyring = deps.keyring !== undefined ? deps.keyring : loadKeyring(config.secretsKeys);
  const metrics = deps.metrics ?? createMetrics();
  const { app, connections } = await createPanelHttp(deps, metrics);
  const lifecycle = new Lifecycle(LIFECYCLE_ORDER, app.log);
  const parts = createPanelParts(app, deps, metrics, keyring);
  const { outbox, agents, cluster, changes, fleet } = parts;
  recordRefusalsAndSignIns(app, outbox);
  app.addHook('onSend', async (request, reply) => void reply.header('x-request-id', request.id));
  watchOutbox(metrics, outbox);
  watchFailover(metrics, parts.scheduler);
  const servers = primaryOf(deps.prisma);
  if (servers) watchPrimary(metrics, servers);
  await app.register(authPlugin, { prisma: deps.prisma, lastUsedFlushMs: config.tokenLastUsedFlushMs, cacheMs: config.tokenCacheMs, outbox, lifecycle });
  // Before every route (they are counted in onRequest, before a token is looked up).
  const signInLimit = await installRateLimits(app, config.http.rateLimits, (hash) => app.authenticator.knows(hash));
  lifecycle.provide('requests', installAnswerHeaders(app, config));

  lifecycle.provide('log-relay', { stop: () => agents.logs.stop() });
  lifecycle.provide('audit-retention', parts.auditRetention);
  lifecycle.provide('fleet', {
    async start() {
      fleet.start();
      // The node list is remembered for GET /v1/sessions during an outage; a database that is out now just leaves it empty.
      await withDeadline(fleet.directory.nodes(), db.queryTimeoutMs, 'the database').catch(() => {});
    },
    stop: () => fleet.stop(),
  });
  // The lease's first renewal is awaited (a database that is out leaves it unheld: no claims until it answers).
  if (cluster) lifecycle.provide('panel-lease', cluster.lease);
  lifecycle.provide('session-facts', {
    start() {
      // What a previous run spilled is written first, then the sessions it left open are closed, then this run's facts.
      outbox.start();
      const orphaned = { kind: 'sessions.orphaned', reason: ORPHANED_REASON, before: new Date().toISOString() } as const;
      outbox.submit(cluster ? { ...orphaned, panelId: cluster.panelId } : orphaned).catch(() => {});
    },
    stop: () => outbox.stop(db.connectTimeoutMs + db.queryTimeoutMs),
  });
  if (cluster) lifecycle.provide('cluster', cluster);
  // Sessions get GOING_AWAY before the server stops accepting; their closes are written or spilled.
  lifecycle.provide('agent-side', agents);
  // Issue 36: after the agent side (sessions say which nodes are live), stopped before it; gives its lease up.
  lifecycle.provide('scheduler', parts.scheduler);
  lifecycle.provide('deployment-changes', changes);
  const internalListener = app.internalListener;
  if (internalListener) lifecycle.provide('internal-listener', { stop: () => internalListener.close() });
  app.addHook('onReady', async () => lifecycle.start());
  app.addHook('preClose', async () => lifecycle.stop());

  exposeParts(app, parts);

  const nodeAuth = await registerAgentGateway(app, { deps, parts, metrics, connections, lifecycle });
  const status = panelStatus(parts, connections, nodeAuth, servers);
  app.decorate('panelStatus', status);
  await registerPanelRoutes(app, { deps, parts, metrics, keyring, lifecycle, signInLimit, status });
  return app;
}
