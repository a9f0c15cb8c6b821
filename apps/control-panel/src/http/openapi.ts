import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

// The OpenAPI document is generated from the route schemas (nothing is written
// by hand), so it cannot drift from what the routes validate. It must be
// registered before any route so every route is seen.

export const OPENAPI_PATH = '/openapi.json';
export const DOCS_PATH = '/docs';

export async function registerOpenApi(app: FastifyInstance, version: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Tether control panel API',
        version,
        description:
          'REST API of the Tether control panel. Authenticate with `Authorization: Bearer <token>`. ' +
          'Errors are always `{ "error": { "code", "message" } }`; docs/api.md lists every code.',
      },
      components: {
        securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'an operator or customer API token' } },
      },
    },
    // Shared schemas (ErrorBody) appear under their $id instead of def-N.
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  });
  await app.register(swaggerUi, { routePrefix: DOCS_PATH, staticCSP: true });
  app.get(OPENAPI_PATH, { schema: { hide: true } }, async () => app.swagger());
}
