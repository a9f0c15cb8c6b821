import { createHash, randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { PanelError } from '../errors.js';
import { parseDatabaseHosts } from './database-hosts.js';
import { connectToPrimary, PrimaryLocator } from './primary-locator.js';

// Applies the SQL migrations in prisma/migrations at start. Prisma's own
// `migrate deploy` needs a native engine that cannot be downloaded everywhere,
// so the panel applies the same files itself, records them in Prisma's
// `_prisma_migrations` table the way Prisma does (sha256 checksum of the file),
// and takes the same advisory lock Prisma takes, so two panels (or a panel and
// `prisma migrate deploy`) starting together never race.

/** Prisma Migrate's advisory lock key. */
export const MIGRATION_LOCK_KEY = 72707369;

export interface MigrationResult {
  applied: string[];
  alreadyApplied: string[];
}

export class MigrationError extends PanelError<'MIGRATION_FAILED'> {
  constructor(message: string, options?: { cause?: unknown }) {
    super('MIGRATION_FAILED', message, options);
  }
}

interface MigrationFile {
  name: string;
  sql: string;
  checksum: string;
}

export async function readMigrations(dir: string): Promise<MigrationFile[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  return Promise.all(
    names.map(async (name) => {
      const sql = await readFile(path.join(dir, name, 'migration.sql'), 'utf8');
      return { name, sql, checksum: createHash('sha256').update(sql).digest('hex') };
    }),
  );
}

const CREATE_TABLE = `
CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
  "id" VARCHAR(36) PRIMARY KEY NOT NULL,
  "checksum" VARCHAR(64) NOT NULL,
  "finished_at" TIMESTAMPTZ,
  "migration_name" VARCHAR(255) NOT NULL,
  "logs" TEXT,
  "rolled_back_at" TIMESTAMPTZ,
  "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(),
  "applied_steps_count" INTEGER NOT NULL DEFAULT 0
)`;

export async function applyMigrations(
  databaseUrl: string,
  migrationsDir: string,
  log: { info(msg: string): void; warn(msg: string): void } = { info: () => {}, warn: () => {} },
): Promise<MigrationResult> {
  const migrations = await readMigrations(migrationsDir);
  // Several servers in the URL: migrations run on the one that accepts writes (primary-locator.ts).
  const locator = new PrimaryLocator(parseDatabaseHosts(databaseUrl), { probeTimeoutMs: 5_000 });
  const client = await connectToPrimary(locator, (url) => new pg.Client({ connectionString: url }));
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      await client.query(CREATE_TABLE);
      const { rows } = await client.query<{ migration_name: string; checksum: string; finished_at: Date | null; rolled_back_at: Date | null }>(
        'SELECT migration_name, checksum, finished_at, rolled_back_at FROM "_prisma_migrations"',
      );
      const failed = rows.find((r) => r.finished_at === null && r.rolled_back_at === null);
      if (failed) {
        throw new MigrationError(
          `migration ${failed.migration_name} failed earlier and is not resolved; fix the database, then mark it rolled back (prisma migrate resolve --rolled-back ${failed.migration_name})`,
        );
      }
      const done = new Map(rows.filter((r) => r.finished_at !== null).map((r) => [r.migration_name, r.checksum]));
      const result: MigrationResult = { applied: [], alreadyApplied: [] };
      for (const migration of migrations) {
        const recorded = done.get(migration.name);
        if (recorded !== undefined) {
          if (recorded !== migration.checksum) log.warn(`migration ${migration.name} was modified after it was applied`);
          result.alreadyApplied.push(migration.name);
          continue;
        }
        const id = randomUUID();
        try {
          await client.query('BEGIN');
          await client.query(migration.sql);
          await client.query(
            `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, finished_at, applied_steps_count)
             VALUES ($1, $2, $3, now(), now(), 1)`,
            [id, migration.checksum, migration.name],
          );
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw new MigrationError(`migration ${migration.name} failed: ${(err as Error).message}`, { cause: err });
        }
        log.info(`applied migration ${migration.name}`);
        result.applied.push(migration.name);
      }
      return result;
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
    }
  } finally {
    await client.end();
  }
}
