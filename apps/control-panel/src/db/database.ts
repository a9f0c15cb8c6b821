import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PrismaPg } from '@prisma/adapter-pg';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from '@tether/embedded-postgres';
import { PrismaClient, type Prisma } from '../generated/prisma/client.js';
import { applyMigrations, type MigrationResult } from './migrate.js';
import { DbHealth } from './db-faults.js';
import { createPool, DEFAULT_DB_LIMITS, type DbLimits } from './pg-pool.js';
import { poolSql, prismaSql, type Sql } from './sql.js';
import { parseDatabaseHosts } from './database-hosts.js';
import { PrimaryLocator } from './primary-locator.js';

export type Db = PrismaClient;

/** The client inside `prisma.$transaction(async (tx) => …)`. */
export type Tx = Prisma.TransactionClient;

export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'prisma', 'migrations');

export type { DbLimits };

/**
 * A Prisma client on a bounded pool: no query, connect or transaction waits past the limits. `databaseUrl` may
 * name several servers (libpq's `h1:p1,h2:p2`): the pool writes to the one primary-locator.ts finds.
 */
export function createPrisma(databaseUrl: string, limits: DbLimits = DEFAULT_DB_LIMITS): Db {
  const health = new DbHealth();
  const locator = new PrimaryLocator(parseDatabaseHosts(databaseUrl), { probeTimeoutMs: limits.connectTimeoutMs });
  const pool = createPool(locator, limits, health);
  const prisma = new PrismaClient({
    adapter: new PrismaPg(pool, { disposeExternalPool: true }),
    // Interactive transactions: wait for a connection, then run, each within the same bounds as a query.
    transactionOptions: { maxWait: limits.connectTimeoutMs, timeout: limits.queryTimeoutMs * 2 },
  });
  healthByClient.set(prisma, health);
  locatorByClient.set(prisma, locator);
  sqlByClient.set(prisma, poolSql(pool));
  return prisma;
}

const healthByClient = new WeakMap<Db, DbHealth>();
const sqlByClient = new WeakMap<Db, Sql>();
const locatorByClient = new WeakMap<Db, PrimaryLocator>();

/** The locator of a client made by createPrisma (which database server its pool writes to). */
export function primaryOf(prisma: Db): PrimaryLocator | undefined {
  return locatorByClient.get(prisma);
}

/**
 * The locator the client's pool follows, for the lease and LISTEN connections to follow the same server; a
 * client not made by createPrisma (or made for another URL) gets its own for `databaseUrl`.
 */
export function locatorOf(prisma: Db, databaseUrl: string, probeTimeoutMs: number): PrimaryLocator {
  const own = locatorByClient.get(prisma);
  const hosts = parseDatabaseHosts(databaseUrl);
  if (own && own.hosts.length === hosts.length && own.hosts.every((h, i) => h.url === hosts[i]!.url)) return own;
  return new PrimaryLocator(hosts, { probeTimeoutMs });
}

/** Plain SQL on the client's own pool (through Prisma's raw statements for a client not made by createPrisma). */
export function sqlOf(prisma: Db): Sql {
  let sql = sqlByClient.get(prisma);
  if (!sql) sqlByClient.set(prisma, (sql = prismaSql(prisma)));
  return sql;
}

/** What the client's pool last saw of the database (always "up" for a client not made by createPrisma). */
export function healthOf(prisma: Db): DbHealth {
  let health = healthByClient.get(prisma);
  if (!health) healthByClient.set(prisma, (health = new DbHealth()));
  return health;
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
  limits?: DbLimits;
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
    const prisma = createPrisma(url, options.limits);
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
