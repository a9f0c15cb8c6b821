import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PrismaPg } from '@prisma/adapter-pg';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from '@tether/embedded-postgres';
import { PrismaClient, type Prisma } from '../generated/prisma/client.js';
import { applyMigrations, type MigrationResult } from './migrate.js';

export type Db = PrismaClient;

/** The client inside `prisma.$transaction(async (tx) => …)`. */
export type Tx = Prisma.TransactionClient;

export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'prisma', 'migrations');

export function createPrisma(databaseUrl: string): Db {
  return new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl }) });
}

export interface Database {
  url: string;
  prisma: Db;
  migrations: MigrationResult;
  /** Set when the panel runs its own embedded PostgreSQL. */
  embedded: EmbeddedPostgresHandle | undefined;
  close(): Promise<void>;
}

/**
 * Opens the panel's database: the server named by `databaseUrl`, or else an
 * embedded PostgreSQL kept in `<dataDir>/postgres`. Applies pending migrations.
 */
export async function openDatabase(options: {
  databaseUrl: string | undefined;
  dataDir: string;
  embeddedPort?: number;
  log?: { info(msg: string): void; warn(msg: string): void };
}): Promise<Database> {
  let embedded: EmbeddedPostgresHandle | undefined;
  let url = options.databaseUrl;
  if (!url) {
    embedded = await startEmbeddedPostgres({
      dataDir: path.join(options.dataDir, 'postgres'),
      port: options.embeddedPort ?? 0,
      persistent: true,
    });
    url = await ensureDatabase(embedded, 'tether');
  }
  try {
    const migrations = await applyMigrations(url, MIGRATIONS_DIR, options.log);
    const prisma = createPrisma(url);
    return {
      url,
      prisma,
      migrations,
      embedded,
      async close() {
        await prisma.$disconnect();
        await embedded?.stop();
      },
    };
  } catch (err) {
    await embedded?.stop();
    throw err;
  }
}

async function ensureDatabase(server: EmbeddedPostgresHandle, name: string): Promise<string> {
  try {
    return await server.createDatabase(name);
  } catch (err) {
    if (/already exists/.test((err as Error).message)) return server.urlFor(name);
    throw err;
  }
}
