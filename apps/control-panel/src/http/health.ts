import type { FastifyPluginAsync } from 'fastify';
import { AppError } from '../errors.js';

export interface HealthOptions {
  /** Resolves when the panel's dependencies answer; rejects otherwise. */
  checkReady: () => Promise<void>;
}

/** Liveness and readiness for orchestrators: /healthz never touches dependencies, /readyz does. */
export const healthRoutes: FastifyPluginAsync<HealthOptions> = async (app, opts) => {
  const ok = { type: 'object', properties: { status: { type: 'string' } }, required: ['status'] } as const;
  app.get('/healthz', { schema: { tags: ['health'], summary: 'Liveness', response: { 200: ok } } }, async () => ({ status: 'ok' }));
  app.get(
    '/readyz',
    { schema: { tags: ['health'], summary: 'Readiness: the database answers', response: { 200: ok, 503: { $ref: 'ErrorBody#' } } } },
    async () => {
      try {
        await opts.checkReady();
      } catch (err) {
        throw new AppError('NOT_READY', `not ready: ${(err as Error).message}`);
      }
      return { status: 'ready' };
    },
  );
};
