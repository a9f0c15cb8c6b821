import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createPrisma } from '../src/db/database.js';
import { ERROR_CATALOG } from '../src/errors.js';

// The OpenAPI document is generated from the route schemas; these checks make
// sure every API operation is in it with its parameters, body, security and
// error answers, that the browsable page is served (offline: the assets are
// bundled), and that docs/api.md names every operation and error code.

type Operation = {
  security?: unknown[];
  parameters?: Array<{ in: string; name: string }>;
  requestBody?: { content: Record<string, { schema: { additionalProperties?: boolean } }> };
  responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }>;
};
type Doc = { openapi: string; paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, unknown> } };

let app: FastifyInstance;
let doc: Doc;

beforeAll(async () => {
  // No database is touched: the document and the docs page are built from the routes alone.
  app = await buildApp({ config: loadConfig({ TETHER_LOG_LEVEL: 'silent' }), prisma: createPrisma('postgresql://nobody:x@127.0.0.1:1/none') });
  const res = await app.inject({ method: 'GET', url: '/openapi.json' });
  expect(res.statusCode).toBe(200);
  doc = res.json() as Doc;
});

afterAll(async () => {
  await app?.close();
});

const OWN_OPERATIONS = [
  'POST /v1/teams',
  'GET /v1/teams',
  'GET /v1/teams/{id}',
  'POST /v1/teams/{id}/tokens',
  'GET /v1/teams/{id}/tokens',
  'DELETE /v1/tokens/{id}',
  'POST /v1/nodes',
  'GET /v1/nodes',
  'GET /v1/nodes/{id}',
  'DELETE /v1/nodes/{id}',
  'POST /v1/services',
  'GET /v1/services',
  'GET /v1/services/{id}',
  'PATCH /v1/services/{id}',
  'DELETE /v1/services/{id}',
  'GET /v1/volumes',
  'DELETE /v1/volumes/{id}',
  'POST /v1/routes',
  'GET /v1/routes',
  'GET /v1/routes/{id}',
  'DELETE /v1/routes/{id}',
  'POST /v1/services/{id}/deployments',
  'GET /v1/services/{id}/deployments',
  'GET /v1/deployments/{id}',
];

const operations = () =>
  Object.entries(doc.paths).flatMap(([route, ops]) => Object.entries(ops).map(([method, op]) => ({ key: `${method.toUpperCase()} ${route}`, route, method, op })));

describe('/openapi.json', () => {
  it('is OpenAPI 3.1 with the bearer scheme and the shared error body listing every catalog code', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.components).toMatchObject({ securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } } });
    const errorBody = doc.components.schemas.ErrorBody as { properties: { error: { properties: { code: { enum: string[] } } } } };
    expect([...errorBody.properties.error.properties.code.enum].sort()).toEqual(Object.keys(ERROR_CATALOG).sort());
  });

  it('contains every REST operation', () => {
    const keys = operations().map((o) => o.key);
    for (const op of OWN_OPERATIONS) expect(keys).toContain(op);
  });

  it('every /v1 operation: bearer security, declared path parameters, 400/401 answers with the error body', () => {
    for (const { key, route, op } of operations().filter((o) => o.route.startsWith('/v1/') && o.route !== '/v1/agent/connect')) {
      expect(op.security, key).toEqual([{ bearerAuth: [] }]);
      for (const name of [...route.matchAll(/\{([^}]+)\}/g)].map((m) => m[1])) {
        expect(op.parameters?.some((p) => p.in === 'path' && p.name === name), `${key} declares {${name}}`).toBe(true);
      }
      for (const status of ['400', '401']) {
        expect(op.responses[status]?.content?.['application/json']?.schema.$ref, `${key} ${status}`).toBe('#/components/schemas/ErrorBody');
      }
    }
  });

  it('lists the answers given before a handler runs: 431 everywhere, 414 with path parameters, 413 and 415 with a body', () => {
    const documented = operations().filter((o) => Object.keys(o.op.responses).some((s) => s.startsWith('2')) && o.route.startsWith('/v1/'));
    expect(documented.length).toBeGreaterThanOrEqual(OWN_OPERATIONS.length);
    for (const { key, route, op } of documented) {
      const expected = ['431', ...(route.includes('{') ? ['414'] : []), ...(op.requestBody ? ['413', '415'] : [])];
      for (const status of expected) {
        expect(op.responses[status]?.content?.['application/json']?.schema.$ref, `${key} ${status}`).toBe('#/components/schemas/ErrorBody');
      }
    }
  });

  it('every request body is a closed object schema (unknown fields are refused, and documented as such)', () => {
    const withBodies = operations().filter((o) => o.op.requestBody);
    expect(withBodies.map((o) => o.key).sort()).toEqual(
      ['PATCH /v1/nodes/{id}', 'PATCH /v1/services/{id}', 'POST /v1/nodes', 'POST /v1/nodes/{id}/lost', 'POST /v1/registries', 'PUT /v1/registries/{id}', 'POST /v1/routes', 'POST /v1/services', 'POST /v1/services/{id}/rollback', 'POST /v1/teams', 'POST /v1/teams/{id}/tokens'].sort(),
    );
    for (const { key, op } of withBodies) expect(op.requestBody!.content['application/json']!.schema.additionalProperties, key).toBe(false);
  });
});

describe('/docs', () => {
  it('serves the browsable page and its bundled assets', async () => {
    const page = await app.inject({ method: 'GET', url: '/docs' });
    const html = page.statusCode === 302 ? await app.inject({ method: 'GET', url: page.headers.location as string }) : page;
    expect(html.statusCode).toBe(200);
    expect(html.headers['content-type']).toMatch(/text\/html/);
    expect(html.body).toContain('swagger-ui');
    const bundle = await app.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' });
    expect(bundle.statusCode).toBe(200);
    expect(bundle.body.length).toBeGreaterThan(100_000);
    const spec = await app.inject({ method: 'GET', url: '/docs/json' });
    expect(spec.json()).toEqual(doc);
  });
});

describe('docs/api.md', () => {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
  const text = readFileSync(path.join(root, 'docs', 'api.md'), 'utf8');

  it('documents every operation of the OpenAPI document', () => {
    const missing = operations()
      .map((o) => `${o.method.toUpperCase()} ${o.route.replace(/\{([^}]+)\}/g, ':$1')}`)
      .filter((op) => !text.includes(`\`${op}\``));
    expect(missing).toEqual([]);
  });

  it('lists every error code with its HTTP status', () => {
    for (const [code, { status }] of Object.entries(ERROR_CATALOG)) {
      expect(text, code).toMatch(new RegExp(`\\|\\s*\`${code}\`\\s*\\|\\s*${status}\\s*\\|`));
    }
  });
});
