import websocket from '@fastify/websocket';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { MAX_PAYLOAD_BYTES } from '@tether/protocol';
import { agentGateway } from './agent-gateway/gateway.js';
import { createAgentSide, type AgentSide } from './agent-side.js';
import type { PanelConfig } from './config.js';
import type { Db } from './db/database.js';
import type { ApiDeps } from './domain/api-deps.js';
import { ErrorBodySchema } from './errors.js';
import { authPlugin } from './http/auth.js';
import { deploymentEventRoutes } from './http/deployment-events.js';
import { createFleet } from './dashboard/fleet.js';
import { dashboardRoutes } from './http/dashboard.js';
import { deploymentRoutes } from './http/deployments.js';
import { edgeServerOptions, installJsonBodyParser, refuseContentEncodings } from './http/edges.js';
import { installErrorHandler } from './http/error-handler.js';
import { healthRoutes } from './http/health.js';
import { logRoutes } from './http/logs.js';
import { metricsRoutes } from './http/metrics.js';
import { nodeRoutes } from './http/nodes.js';
import { registerOpenApi } from './http/openapi.js';
import { reloadRoutes } from './http/reloads.js';
import { routeRoutes } from './http/routes.js';
import { serviceRoutes } from './http/services.js';
import { sessionRoutes } from './http/sessions.js';
import { statusRoutes } from './http/status.js';
import { teamRoutes } from './http/teams.js';
import { tokenRoutes } from './http/tokens.js';
import { partAwareSchemaController } from './http/validation.js';
import { PanelEvents } from './panel-events.js';
import { createMetrics, type PanelMetrics } from './panel-metrics.js';
import type { RoutingMapSource } from './routing/routing-map.js';
import type { DeploymentDispatcher } from './sessions/session-dispatcher.js';
import { PrismaSessionStore, type SessionStore } from './sessions/session-store.js';

/** Shown in the OpenAPI document. */
export const PANEL_VERSION = '0.1.0';

export interface AppDependencies {
  config: PanelConfig;
  prisma: Db;
  /** A pino logger; silent when absent (tests). */
  logger?: FastifyBaseLogger;
  /** REST → session notifications; a fresh one when absent. */
  events?: PanelEvents;
  /** Sends persisted deployments to their node; the agent side's dispatcher when absent. */
  dispatcher?: DeploymentDispatcher;
  metrics?: PanelMetrics;
  /** What the agent side writes through; Prisma when absent (tests wrap it to count writes). */
  sessionStore?: SessionStore;
  /** Where routing maps come from; the database when absent (bench/routing-panel.ts gives every node one map). */
  routingMaps?: RoutingMapSource;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The agent side (connected map, dispatch, workload sync, routing push), for tests and benches. */
    agentSide: AgentSide;
  }
}

/**
 * Builds the panel's HTTP app from its dependencies: every HTTP plugin is
 * registered here, and the agent side is made, started and stopped here.
 * Nothing here reads the environment or listens.
 */
export async function buildApp(deps: AppDependencies): Promise<FastifyInstance> {
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: 1024 * 1024,
    // Bodies strict ("5" is not a number), query strings and params converted.
    schemaController: partAwareSchemaController(),
    // Malformed HTTP, undecodable URLs and over-long path parameters answer in the API's error shape.
    ...edgeServerOptions,
  });
  app.addSchema(ErrorBodySchema);
  installErrorHandler(app);
  // The API speaks JSON only; a text body is 415 UNSUPPORTED_MEDIA_TYPE, not a string that fails validation.
  app.removeContentTypeParser('text/plain');
  installJsonBodyParser(app);
  refuseContentEncodings(app);
  // Before any route, so the OpenAPI document sees them all.
  await registerOpenApi(app, PANEL_VERSION);
  await app.register(authPlugin, { prisma: deps.prisma, lastUsedFlushMs: deps.config.tokenLastUsedFlushMs });

  const events = deps.events ?? new PanelEvents();
  const metrics = deps.metrics ?? createMetrics();
  const agents = createAgentSide({
    config: deps.config,
    prisma: deps.prisma,
    store: deps.sessionStore ?? new PrismaSessionStore(deps.prisma),
    events,
    metrics,
    logger: app.log,
    ...(deps.routingMaps ? { maps: deps.routingMaps } : {}),
  });
  app.decorate('agentSide', agents);
  app.addHook('onReady', async () => agents.start());
  // preClose: sessions get GOING_AWAY before the server stops accepting.
  app.addHook('preClose', async () => agents.stop());
  // The fleet page and the per-node metrics: rows from the connected map plus cached database facts.
  const fleet = createFleet({ config: deps.config, prisma: deps.prisma, registry: agents.registry, routing: agents.routing, metrics, logger: app.log });
  app.addHook('onReady', async () => fleet.start());
  app.addHook('preClose', async () => fleet.stop());

  // The agent gateway: GET /v1/agent/connect.
  await app.register(websocket, { options: { maxPayload: MAX_PAYLOAD_BYTES, perMessageDeflate: false } });
  const s = deps.config.sessions;
  await app.register(agentGateway, {
    prisma: deps.prisma,
    registry: agents.registry,
    metrics,
    timing: {
      heartbeatIntervalMs: s.heartbeatIntervalMs,
      pingIntervalMs: s.pingIntervalMs,
      panelIdleTimeoutMs: s.idleTimeoutMs,
      agentIdleTimeoutMs: s.agentIdleTimeoutMs,
      ackTimeoutMs: s.ackTimeoutMs,
      helloTimeoutMs: s.helloTimeoutMs,
      sendBufferLimitBytes: s.sendBufferLimitBytes,
    },
  });

  // HTTP: one plugin per resource.
  await app.register(healthRoutes, {
    checkReady: async () => {
      await deps.prisma.$queryRaw`SELECT 1`;
    },
  });
  await app.register(metricsRoutes, { metrics });
  const api: ApiDeps = { prisma: deps.prisma, events, dispatcher: deps.dispatcher ?? agents.dispatcher };
  await app.register(teamRoutes, { prefix: '/v1', ...api });
  await app.register(tokenRoutes, { prefix: '/v1', ...api });
  await app.register(nodeRoutes, { prefix: '/v1', ...api });
  await app.register(serviceRoutes, { prefix: '/v1', ...api });
  await app.register(routeRoutes, { prefix: '/v1', ...api });
  await app.register(deploymentRoutes, { prefix: '/v1', ...api, watchPollMs: deps.config.deployments.watchPollMs });
  await app.register(logRoutes, { prefix: '/v1', prisma: deps.prisma, registry: agents.registry, relay: agents.logs });
  await app.register(deploymentEventRoutes, { prefix: '/v1', prisma: deps.prisma, pollMs: deps.config.deployments.watchPollMs });
  await app.register(sessionRoutes, {
    prefix: '/v1',
    prisma: deps.prisma,
    registry: agents.registry,
    routing: agents.routing,
    missedAcks24h: (nodeId) => fleet.directory.snapshot.missedAcks24h.get(nodeId) ?? 0,
  });
  await app.register(reloadRoutes, { prefix: '/v1', prisma: deps.prisma, routing: agents.routing });
  await app.register(statusRoutes, { prefix: '/v1', prisma: deps.prisma, registry: agents.registry });
  await app.register(dashboardRoutes, { prisma: deps.prisma, fleet, publicUrl: deps.config.publicUrl, dbDeadlineMs: deps.config.dashboard.dbDeadlineMs });
  return app;
}
