import Fastify, { type FastifyInstance } from 'fastify';
import { PANEL_VERSION_HEADER } from '@tether/common';
import { newRequestId } from './audit/audit-entry.js';
import type { PanelConfig } from './config.js';
import { AppError, ErrorBodySchema } from './errors.js';
import { ConnectionCap } from './http/connection-cap.js';
import { SECURITY_HEADERS } from './http/dashboard.js';
import { edgeServerOptions, installJsonBodyParser, refuseCappedConnections, refuseContentEncodings, requestDeadlineOptions } from './http/edges.js';
import { installErrorHandler } from './http/error-handler.js';
import { separateInternalSurface } from './http/internal-listener.js';
import { registerOpenApi } from './http/openapi.js';
import { installRequestGuards } from './http/request-guards.js';
import { partAwareSchemaController } from './http/validation.js';
import type { Component } from './lifecycle.js';
import type { PanelMetrics } from './panel-metrics.js';
import type { AppDependencies } from './panel-parts.js';

// The panel's HTTP edges, before any route or background part: the Fastify
// instance and what every request meets first (the per-address cap, the
// internal surface's own listener, the error shape, body parsers and guards),
// and the headers every answer carries. app.ts composes the rest.

/** Shown in the OpenAPI document. */
export const PANEL_VERSION = '0.1.0';

export async function createPanelHttp(deps: AppDependencies, metrics: PanelMetrics): Promise<{ app: FastifyInstance; connections: ConnectionCap }> {
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    // Unique across panels (the audit trail's requestId); never taken from the client.
    genReqId: newRequestId,
    // Only these proxies' X-Forwarded-For is believed (the audit trail's sourceAddress).
    ...(deps.config.audit.trustedProxies.length > 0 ? { trustProxy: deps.config.audit.trustedProxies } : {}),
    bodyLimit: 1024 * 1024,
    // Bodies strict ("5" is not a number), query strings and params converted.
    schemaController: partAwareSchemaController(),
    // Malformed HTTP, undecodable URLs and over-long path parameters answer in the API's error shape.
    ...edgeServerOptions,
    ...requestDeadlineOptions(deps.config.http.bodyTimeoutMs),
  });
  // Before any hook reads a request: an address over its cap is refused before its token is looked at.
  const connections = new ConnectionCap(deps.config.http.maxConnectionsPerAddress);
  const detachCap = connections.attach(app.server);
  app.addHook('onClose', async () => detachCap());
  refuseCappedConnections(app, connections, () => metrics.edgeRefusals.inc({ code: 'TOO_MANY_CONNECTIONS' }));
  // TETHER_INTERNAL_LISTEN: /internal/v1 only on its own listener (server.ts listens on it), 404 on the public one.
  app.decorate('internalListener', deps.config.http.internalListen ? separateInternalSurface(app) : undefined);
  app.addSchema(ErrorBodySchema);
  installErrorHandler(app);
  // The API speaks JSON only; a text body is 415 UNSUPPORTED_MEDIA_TYPE, not a string that fails validation.
  app.removeContentTypeParser('text/plain');
  installJsonBodyParser(app);
  refuseContentEncodings(app);
  installRequestGuards(app);
  // Before any route, so the OpenAPI document sees them all.
  await registerOpenApi(app, PANEL_VERSION);
  return { app, connections };
}

/**
 * Headers on every answer, and 503 NOT_READY while the panel stops. Returns the lifecycle's `requests`
 * component: stopped first, so a request arriving during a rolling restart answers like /readyz.
 */
export function installAnswerHeaders(app: FastifyInstance, config: PanelConfig): Component {
  // Every answer names the panel's version: the CLI refuses a panel it does not fit before trusting an answer.
  app.addHook('onRequest', async (_request, reply) => {
    reply.header(PANEL_VERSION_HEADER, PANEL_VERSION);
  });
  // Whatever produced the answer (a route, the not-found handler, the error handler): HSTS when the panel is
  // reached over https; the fleet page's security headers on every /dashboard answer.
  const hsts = config.publicUrl?.startsWith('https:') ? 'max-age=31536000' : undefined;
  app.addHook('onSend', async (request, reply, payload) => {
    if (hsts) void reply.header('strict-transport-security', hsts);
    if (request.url === '/dashboard' || request.url.startsWith('/dashboard/')) {
      for (const [k, v] of Object.entries(SECURITY_HEADERS)) void reply.header(k, v);
      if (!reply.getHeader('cache-control')) void reply.header('cache-control', 'no-store');
    }
    return payload;
  });
  let closing = false;
  app.addHook('onRequest', async () => {
    if (closing) throw new AppError('NOT_READY', 'the panel is shutting down; retry (another panel)');
  });
  return {
    stop: () => {
      closing = true;
    },
  };
}
