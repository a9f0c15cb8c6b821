import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPostgres, type TestPostgres } from '@tether/testkit';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createPrisma, MIGRATIONS_DIR, type Db } from '../src/db/database.js';
import { applyMigrations } from '../src/db/migrate.js';

let pg: TestPostgres;
let prisma: Db;
let app: FastifyInstance;

beforeAll(async () => {
  pg = await startTestPostgres();
  await applyMigrations(pg.url, MIGRATIONS_DIR);
  prisma = createPrisma(pg.url);
  app = await buildApp({ config: loadConfig({ DATABASE_URL: pg.url }), prisma });
  await app.listen({ host: '127.0.0.1', port: 0 });
});

afterAll(async () => {
  await app?.close();
  await prisma?.$disconnect();
  await pg?.stop();
});

const url = (p: string) => `http://127.0.0.1:${(app.server.address() as { port: number }).port}${p}`;

describe('health', () => {
  it('healthz answers without touching the database', async () => {
    const res = await fetch(url('/healthz'));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('readyz answers 200 while the database answers, 503 NOT_READY when it does not', async () => {
    expect((await fetch(url('/readyz'))).status).toBe(200);
    const broken = await buildApp({ config: loadConfig({}), prisma: createPrisma('postgresql://nobody:x@127.0.0.1:1/none') });
    try {
      const res = await broken.inject({ method: 'GET', url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({ error: { code: 'NOT_READY' } });
    } finally {
      await broken.close();
    }
  });

  it('unknown routes get the JSON error shape', async () => {
    const res = await fetch(url('/v1/nothing-here'));
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: { code: 'NOT_FOUND', message: 'no route GET /v1/nothing-here' } });
  });
});
