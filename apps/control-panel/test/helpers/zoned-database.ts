import { afterAll, beforeAll } from 'vitest';
import { startTestPostgres, type TestPostgres } from '@tether/testkit';
import { createPrisma, MIGRATIONS_DIR, type Db } from '../../src/db/database.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { PrismaFactWriter } from '../../src/session-writes/fact-writer.js';

/**
 * A migrated PostgreSQL of the suite's own whose database default time zone is `zone` (not UTC), with a
 * client on the panel's pool and a fact writer on it. Started before the suite's tests, stopped after.
 */
export function useZonedDatabase(zone: string): { prisma: () => Db; writer: () => PrismaFactWriter } {
  const limits = { connectTimeoutMs: 2_000, queryTimeoutMs: 5_000, poolSize: 2 };
  let pg: TestPostgres | undefined;
  let prisma: Db | undefined;
  let writer: PrismaFactWriter | undefined;
  beforeAll(async () => {
    pg = await startTestPostgres();
    await applyMigrations(pg.url, MIGRATIONS_DIR);
    const setup = createPrisma(pg.url, limits);
    await setup.$executeRawUnsafe(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET timezone = %L', current_database(), '${zone}'); END $$`);
    await setup.$disconnect();
    prisma = createPrisma(pg.url, limits);
    writer = new PrismaFactWriter(prisma, { maxWait: 2_000, timeout: 10_000 });
  }, 60_000);
  afterAll(async () => {
    await prisma?.$disconnect();
    await pg?.stop();
  });
  return { prisma: () => prisma!, writer: () => writer! };
}
