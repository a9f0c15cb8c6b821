import websocket from '@fastify/websocket';
import type { FastifyInstance } from 'fastify';
import { agentGateway, WS_MAX_PAYLOAD } from '../agent-gateway/gateway.js';
import type { PanelConfig } from '../config.js';
import type { Db } from '../db/database.js';
import type { PanelEvents } from '../lib/events.js';
import type { PanelMetrics } from '../lib/metrics.js';
import { metricsRoutes } from '../routes/metrics.js';
import { reloadRoutes } from '../routes/reloads.js';
import { sessionRoutes } from '../routes/sessions.js';
import { statusRoutes } from '../routes/status.js';
import type { RoutingMapSource } from '../routing/routing-map.js';
import { createSessionLayer, type SessionLayer } from './session-layer.js';
import { PrismaSessionStore, type SessionStore } from './session-store.js';

declare module 'fastify' {
  interface FastifyInstance {
    sessions: SessionLayer;
  }
}

/**
 * Adds the agent side of the panel to an app: the session layer (started when
 * the app is ready, closed with it), the agent gateway, session health, status
 * and metrics routes.
 */
export async function registerSessions(
  app: FastifyInstance,
  deps: { config: PanelConfig; prisma: Db; events: PanelEvents; metrics: PanelMetrics; store?: SessionStore; maps?: RoutingMapSource },
): Promise<SessionLayer> {
  const layer = createSessionLayer({
    config: deps.config,
    prisma: deps.prisma,
    store: deps.store ?? new PrismaSessionStore(deps.prisma),
    events: deps.events,
    metrics: deps.metrics,
    logger: app.log,
    ...(deps.maps ? { maps: deps.maps } : {}),
  });
  app.decorate('sessions', layer);
  app.addHook('onReady', async () => layer.start());
  // preClose: sessions get GOING_AWAY before the server stops accepting.
  app.addHook('preClose', async () => layer.stop());

  await app.register(websocket, { options: { maxPayload: WS_MAX_PAYLOAD, perMessageDeflate: false } });
  const s = deps.config.sessions;
  await app.register(agentGateway, {
    prisma: deps.prisma,
    registry: layer.registry,
    metrics: deps.metrics,
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
  await app.register(sessionRoutes, { prisma: deps.prisma, registry: layer.registry, routing: layer.routing });
  await app.register(reloadRoutes, { prisma: deps.prisma, routing: layer.routing });
  await app.register(statusRoutes, { prisma: deps.prisma, registry: layer.registry });
  await app.register(metricsRoutes, { metrics: deps.metrics });
  return layer;
}
