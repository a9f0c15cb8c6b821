import type { FastifyPluginAsync } from 'fastify';
import type { PanelMetrics } from '../panel-metrics.js';

/** Prometheus scrape endpoint. */
export const metricsRoutes: FastifyPluginAsync<{ metrics: PanelMetrics }> = async (app, opts) => {
  app.get('/metrics', { schema: { tags: ['health'], summary: 'Prometheus metrics (text exposition format)' } }, async (_request, reply) => {
    reply.header('content-type', opts.metrics.registry.contentType);
    return opts.metrics.registry.metrics();
  });
};
