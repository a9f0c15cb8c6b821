import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFaultablePostgres, waitFor, type FaultablePostgres } from '@tether/testkit';
import { createPrisma, healthOf, MIGRATIONS_DIR, sqlOf, type Db } from '../src/db/database.js';
import { DbHealth, isDatabaseUnavailable, isPermanentDatabaseError } from '../src/db/db-faults.js';
import { applyMigrations } from '../src/db/migrate.js';
import { createPool } from '../src/db/pg-pool.js';
import { PrimaryLocator } from '../src/db/primary-locator.js';

// The bounds the panel enforces itself, against a real PostgreSQL that is
// frozen or stopped: a frozen server answers nothing, so the client's
// deadlines are the only way out, and a connection whose query timed out
// must never be used again. And which errors count as "database unavailable".

const LIMIT_MS = 500;
let pg: FaultablePostgres;
let prisma: Db;

beforeAll(async () => {
  pg = await startFaultablePostgres();
  await applyMigrations(pg.url, MIGRATIONS_DIR);
  prisma = createPrisma(pg.url, { connectTimeoutMs: LIMIT_MS, queryTimeoutMs: LIMIT_MS, poolSize: 2 });
}, 60_000);
afterEach(async () => {
  pg.thaw();
  await pg.start();
});
afterAll(async () => {
  await prisma?.$disconnect();
  await pg?.destroy();
});

async function timed<T>(work: Promise<T>): Promise<{ ms: number; error: unknown }> {
  const started = performance.now();
  try {
    await work;
    return { ms: performance.now() - started, error: undefined };
  } catch (error) {
    return { ms: performance.now() - started, error };
  }
}

describe('bounded pool', () => {
  it('a query on a frozen server fails at query_timeout; its connection is destroyed and the next one is new', async () => {
    const health = new DbHealth();
    const pool = createPool(PrimaryLocator.forUrl(pg.url, LIMIT_MS), { connectTimeoutMs: LIMIT_MS, queryTimeoutMs: LIMIT_MS, poolSize: 1 }, health);
    try {
      const pid = async () => (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      // A checked-out connection, as a transaction holds one.
      const client = await pool.connect();
      const before = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      pg.freeze();
      const stuck = await timed(client.query('SELECT 1'));
      expect((stuck.error as Error).message).toBe('Query read timeout');
      expect(stuck.ms).toBeGreaterThanOrEqual(LIMIT_MS - 20);
      expect(stuck.ms).toBeLessThan(LIMIT_MS + 700);
      expect(health.recentlyDown).toBe(true);
      // Still checked out when its destroyed connection ends, as when Prisma holds it a while: node-postgres emits
      // 'error' on the client then, and pg-pool listens only to idle ones (unheard: an uncaught exception).
      await new Promise((resolve) => client.once('end', resolve));
      // Released without an error, as Prisma's rollback does: node-postgres alone would pool it again, still busy.
      client.release();
      await waitFor(() => pool.totalCount === 0, { timeoutMs: 1_000 });
      // With one connection in the pool, the next query does not queue behind the stuck one: it opens a new one, bounded too.
      const next = await timed(pool.query('SELECT 1'));
      expect(isDatabaseUnavailable(next.error)).toBe(true);
      expect(next.ms).toBeLessThan(LIMIT_MS + 700);
      pg.thaw();
      expect(await pid()).not.toBe(before);
      expect(health.recentlyDown).toBe(false);
    } finally {
      await pool.end();
    }
  });

  it('Prisma queries and interactive transactions on a frozen server fail within their bounds, as "unavailable"', async () => {
    await prisma.team.count();
    pg.freeze();
    const read = await timed(prisma.team.count());
    expect(isDatabaseUnavailable(read.error)).toBe(true);
    expect(read.ms).toBeLessThan(2 * LIMIT_MS + 700);
    const tx = await timed(prisma.$transaction(async (t) => t.team.create({ data: { name: 'frozen' } })));
    expect(isDatabaseUnavailable(tx.error)).toBe(true);
    expect(tx.ms).toBeLessThan(3 * LIMIT_MS + 700);
    expect(healthOf(prisma).recentlyDown).toBe(true);
    pg.thaw();
    expect(await prisma.team.count({ where: { name: 'frozen' } })).toBe(0);
  });

  it('plain SQL (the hot paths of a session open) shares the pool: same bound, same health, same error kinds', async () => {
    const sql = sqlOf(prisma);
    expect(await sql.rows<{ n: number }>('SELECT $1::int + 1 AS n', [41])).toEqual([{ n: 42 }]);
    expect(healthOf(prisma).recentlyDown).toBe(false);
    pg.freeze();
    const read = await timed(sql.rows('SELECT 1'));
    expect(isDatabaseUnavailable(read.error)).toBe(true);
    expect(read.ms).toBeLessThan(2 * LIMIT_MS + 700);
    expect(healthOf(prisma).recentlyDown).toBe(true);
    pg.thaw();
    await prisma.team.create({ data: { name: 'plain-sql-once' } });
    const duplicate = await timed(sql.run(`INSERT INTO teams (id, name, created_at) VALUES ('dup', 'plain-sql-once', now())`));
    expect(isDatabaseUnavailable(duplicate.error)).toBe(false);
    expect(isPermanentDatabaseError(duplicate.error)).toBe(true);
    await prisma.team.deleteMany({ where: { name: 'plain-sql-once' } });
  });

  it('a stopped server is "unavailable" at once; bugs and constraint violations are not', async () => {
    await prisma.team.create({ data: { name: 'unique-once' } });
    const duplicate = await timed(prisma.team.create({ data: { name: 'unique-once' } }));
    expect(isDatabaseUnavailable(duplicate.error)).toBe(false);
    expect(isPermanentDatabaseError(duplicate.error)).toBe(true);
    expect(isDatabaseUnavailable(new Error('boom'))).toBe(false);
    // Unknown: not permanent, so the session-fact writer keeps and retries rather than drop it.
    expect(isPermanentDatabaseError(new Error('boom'))).toBe(false);
    expect(isDatabaseUnavailable(new TypeError("Cannot read properties of undefined (reading 'id')"))).toBe(false);
    await pg.stop();
    const down = await timed(prisma.team.count());
    expect(isDatabaseUnavailable(down.error)).toBe(true);
    expect(isPermanentDatabaseError(down.error)).toBe(false);
    expect(down.ms).toBeLessThan(LIMIT_MS);
    await pg.start();
    expect(await prisma.team.count()).toBe(1);
  });
});
