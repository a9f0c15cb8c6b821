import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { isOptionalBody } from './request-guards.js';
import { errorResponses } from './schemas.js';

// The OpenAPI document is generated from the route schemas (nothing is written
// by hand), so it cannot drift from what the routes validate. It must be
// registered before any route so every route is seen.

export const OPENAPI_PATH = '/openapi.json';
export const DOCS_PATH = '/docs';

export async function registerOpenApi(app: FastifyInstance, version: string): Promise<void> {
  // The answers any request can get before its handler runs, added to every documented operation in one place:
  // 431 for headers, 414 where the path has parameters, 413 and 415 where there is a body.
  const optionalBodies = new Set<string>();
  app.addHook('onRoute', (route) => {
    const schema = route.schema as { hide?: boolean; body?: unknown; response?: Record<string, unknown> } | undefined;
    if (!schema?.response || schema.hide) return;
    if (isOptionalBody(schema.body)) for (const method of [route.method].flat()) optionalBodies.add(`${method.toLowerCase()} ${route.url}`);
    const extra = errorResponses(431, ...(route.url.includes(':') ? [414 as const] : []), ...(schema.body ? [413 as const, 415 as const] : []));
    schema.response = { ...extra, ...schema.response };
  });
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
    // @fastify/swagger marks every body required; a body declared Type.Optional may be left out (request-guards.ts).
    transformObject: (documentObject) => {
      const doc = (documentObject as { openapiObject: { paths?: Record<string, Record<string, { requestBody?: { required?: boolean } }>> } }).openapiObject;
      for (const [path, operations] of Object.entries(doc.paths ?? {})) {
        const url = path.replace(/\{([^}]+)\}/g, ':$1');
        for (const [method, op] of Object.entries(operations)) if (op.requestBody && optionalBodies.has(`${method} ${url}`)) op.requestBody.required = false;
      }
      return doc as never;
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  });
  await app.register(swaggerUi, { routePrefix: DOCS_PATH, staticCSP: true });
  app.get(OPENAPI_PATH, { schema: { hide: true } }, async () => app.swagger());
}
