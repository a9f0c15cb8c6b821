import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { PanelConfig } from './config.js';
import type { Db } from './db/database.js';
import type { DeploymentDispatcher } from './deployments/dispatcher.js';
import { ErrorBodySchema } from './errors.js';
import { authPlugin } from './lib/auth.js';
import { installErrorHandler } from './lib/error-handler.js';
import { registerOpenApi } from './lib/openapi.js';
import { partAwareSchemaController } from './lib/validation.js';
import { deploymentRoutes } from './routes/deployments.js';
import { healthRoutes } from './routes/health.js';
import { nodeRoutes } from './routes/nodes.js';
import { routeRoutes } from './routes/routes.js';
import { serviceRoutes } from './routes/services.js';
import { teamRoutes } from './routes/teams.js';
import { tokenRoutes } from './routes/tokens.js';
import type { ApiDeps } from './services/deps.js';
import { PanelEvents } from './lib/events.js';
import { createMetrics, type PanelMetrics } from './lib/metrics.js';
import { registerSessions } from './sessions/register.js';
import type { SessionStore } from './sessions/session-store.js';
import type { RoutingMapSource } from './routing/routing-map.js';

/** Shown in the OpenAPI document. */
export const PANEL_VERSION = '0.1.0';

export interface AppDependencies {
  config: PanelConfig;
  prisma: Db;
  /** A pino logger; silent when absent (tests). */
  logger?: FastifyBaseLogger;
  /** REST → session notifications; a fresh one when absent. */
  events?: PanelEvents;
  /** Sends persisted deployments to their node; the session layer's dispatcher when absent. */
  dispatcher?: DeploymentDispatcher;
  metrics?: PanelMetrics;
  /** What the session layer writes through; Prisma when absent (tests wrap it to count writes). */
  sessionStore?: SessionStore;
  /** Where routing maps come from; the database when absent (bench/routing-panel.ts gives every node one map). */
  routingMaps?: RoutingMapSource;
}

/** Builds the panel's HTTP app from its dependencies. Nothing here reads the environment or listens. */
export async function buildApp(deps: AppDependencies): Promise<FastifyInstance> {
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: 1024 * 1024,
    // Bodies strict ("5" is not a number), query strings and params converted.
    schemaController: partAwareSchemaController(),
  });
  app.addSchema(ErrorBodySchema);
  installErrorHandler(app);
  // The API speaks JSON only; a text body is 415 UNSUPPORTED_MEDIA_TYPE, not a string that fails validation.
  app.removeContentTypeParser('text/plain');
  // Before any route, so the OpenAPI document sees them all.
  await registerOpenApi(app, PANEL_VERSION);
  await app.register(authPlugin, { prisma: deps.prisma, lastUsedFlushMs: deps.config.sessions.lastSeenFlushMs });
  await app.register(healthRoutes, {
    checkReady: async () => {
      await deps.prisma.$queryRaw`SELECT 1`;
    },
  });
  const events = deps.events ?? new PanelEvents();
  // The agent side: gateway, connected map, dispatch over live sessions, session health and status.
  const sessions = await registerSessions(app, {
    config: deps.config,
    prisma: deps.prisma,
    events,
    metrics: deps.metrics ?? createMetrics(),
    ...(deps.sessionStore ? { store: deps.sessionStore } : {}),
    ...(deps.routingMaps ? { maps: deps.routingMaps } : {}),
  });
  const api: ApiDeps = { prisma: deps.prisma, events, dispatcher: deps.dispatcher ?? sessions.dispatcher };
  await app.register(teamRoutes, { prefix: '/v1', ...api });
  await app.register(tokenRoutes, { prefix: '/v1', ...api });
  await app.register(nodeRoutes, { prefix: '/v1', ...api });
  await app.register(serviceRoutes, { prefix: '/v1', ...api });
  await app.register(routeRoutes, { prefix: '/v1', ...api });
  await app.register(deploymentRoutes, { prefix: '/v1', ...api });
  return app;
}
