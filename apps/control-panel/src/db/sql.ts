import type pg from 'pg';

// Plain SQL on the pool under Prisma, for the statements a reconnect storm
// runs thousands of times a second (token checks, claims, session facts, the
// reads of a session open). Prisma's client costs 4-6x the CPU of the same
// statement sent by node-postgres (bench figures in docs/benchmarks.md, "The
// storm, third round"); these statements are raw SQL already, so they lose
// nothing by skipping it. Same pool, so the same deadlines, connection limit
// and health reporting as every Prisma query (db/pg-pool.ts).

export interface Sql {
  /** The rows of one statement ($1, $2 … placeholders). */
  rows<R>(text: string, values?: readonly unknown[]): Promise<R[]>;
  /** Runs one statement; resolves with the rows it touched. */
  run(text: string, values?: readonly unknown[]): Promise<number>;
}

/** Sql on a node-postgres pool. */
export function poolSql(pool: pg.Pool): Sql {
  return {
    async rows<R>(text: string, values: readonly unknown[] = []) {
      return (await pool.query(text, values as unknown[])).rows as R[];
    },
    async run(text: string, values: readonly unknown[] = []) {
      return (await pool.query(text, values as unknown[])).rowCount ?? 0;
    },
  };
}

/** What a Prisma client offers for raw statements: the fallback for a client that has no pool of ours. */
interface RawClient {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>;
}

/** Sql through Prisma's raw statements (inside a transaction, or a client without our pool). */
export function prismaSql(client: RawClient): Sql {
  return {
    rows: <R>(text: string, values: readonly unknown[] = []) => client.$queryRawUnsafe<R[]>(text, ...values),
    run: (text: string, values: readonly unknown[] = []) => client.$executeRawUnsafe(text, ...values),
  };
}
