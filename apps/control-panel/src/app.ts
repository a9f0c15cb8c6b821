import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { PanelConfig } from './config.js';
import type { Db } from './db/database.js';
import { ErrorBodySchema } from './errors.js';
import { installErrorHandler } from './lib/error-handler.js';
import { healthRoutes } from './routes/health.js';

export interface AppDependencies {
  config: PanelConfig;
  prisma: Db;
  /** A pino logger; silent when absent (tests). */
  logger?: FastifyBaseLogger;
}

/** Builds the panel's HTTP app from its dependencies. Nothing here reads the environment or listens. */
export async function buildApp(deps: AppDependencies): Promise<FastifyInstance> {
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: 1024 * 1024,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, allErrors: false } },
  });
  app.addSchema(ErrorBodySchema);
  installErrorHandler(app);
  await app.register(healthRoutes, {
    checkReady: async () => {
      await deps.prisma.$queryRaw`SELECT 1`;
    },
  });
  return app;
}
