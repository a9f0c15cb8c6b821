import type { FastifyPluginAsync } from 'fastify';
import { AppError } from '../errors.js';

export interface HealthOptions {
  /** Resolves when the panel's dependencies answer within the readiness deadline; rejects otherwise. */
  checkReady: () => Promise<void>;
}

/**
 * Liveness and readiness for orchestrators: /healthz never touches
 * dependencies, /readyz does, under its own short deadline (a frozen database
 * makes it 503, never a hang). Its message never carries driver text; the log does.
 */
export const healthRoutes: FastifyPluginAsync<HealthOptions> = async (app, opts) => {
  const ok = { type: 'object', properties: { status: { type: 'string' } }, required: ['status'] } as const;
  app.get('/healthz', { schema: { tags: ['health'], summary: 'Liveness', response: { 200: ok } } }, async () => ({ status: 'ok' }));
  app.get(
    '/readyz',
    { schema: { tags: ['health'], summary: 'Readiness: the database answers within TETHER_READY_TIMEOUT_MS', response: { 200: ok, 503: { $ref: 'ErrorBody#' } } } },
    async (request) => {
      try {
        await opts.checkReady();
      } catch (err) {
        request.log.warn({ err }, 'not ready');
        throw new AppError('NOT_READY', 'not ready: the database did not answer');
      }
      return { status: 'ready' };
    },
  );
};
