import { afterAll, beforeAll } from 'vitest';
import { startTestPostgres, type TestPostgres } from '@tether/testkit';
import { createPrisma, MIGRATIONS_DIR, type Db, type DbLimits } from '../../src/db/database.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { PrismaFactWriter } from '../../src/session-writes/fact-writer.js';

/** A small pool with short bounds, for suites that write through one client. */
export const SMALL_POOL: DbLimits = { connectTimeoutMs: 2_000, queryTimeoutMs: 5_000, poolSize: 2 };

export interface MigratedDatabase {
  /** The database's URL (for panels and clients of the suite's own). */
  readonly url: string;
  /** A client on the panel's pool. */
  readonly prisma: Db;
  /** The session-fact writer on that client. */
  readonly writer: PrismaFactWriter;
}

/**
 * A PostgreSQL of the suite's own with a migrated database, started before the suite's tests and stopped
 * after them (after the suite's own afterAll hooks, which run first). `zone`: the database's default time
 * zone, for tests that must hold whatever it is; `limits`: the pool's (default: the panel's defaults).
 */
export function useMigratedDatabase(options: { zone?: string; limits?: DbLimits } = {}): MigratedDatabase {
  let pg: TestPostgres | undefined;
  let url: string | undefined;
  let prisma: Db | undefined;
  let writer: PrismaFactWriter | undefined;
  beforeAll(async () => {
    pg = await startTestPostgres();
    url = await pg.createDatabase();
    await applyMigrations(url, MIGRATIONS_DIR);
    if (options.zone) {
      const setup = createPrisma(url, options.limits);
      await setup.$executeRawUnsafe(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET timezone = %L', current_database(), '${options.zone}'); END $$`);
      await setup.$disconnect();
    }
    prisma = createPrisma(url, options.limits);
    writer = new PrismaFactWriter(prisma, { maxWait: 2_000, timeout: 10_000 });
  }, 60_000);
  afterAll(async () => {
    await prisma?.$disconnect();
    await pg?.stop();
  });
  return {
    get url() {
      return url!;
    },
    get prisma() {
      return prisma!;
    },
    get writer() {
      return writer!;
    },
  };
}
