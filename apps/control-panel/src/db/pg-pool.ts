import pg from 'pg';

// The pool under Prisma, with the bounds a frozen server cannot enforce: a
// connect/acquire deadline, a per-query deadline on the client side
// (query_timeout) and the same on the server (statement_timeout), TCP
// keepalive. node-postgres leaves a connection whose query timed out busy with
// that query: BoundedClient destroys its socket instead, so the pool drops it
// and nothing later runs behind a query that will never answer.

export interface DbLimits {
  /** Waiting for a pooled connection or opening a new one (pg-pool uses one deadline for both). */
  connectTimeoutMs: number;
  /** Any one statement, enforced by the client (and by the server when it is alive). */
  queryTimeoutMs: number;
  /** Connections in the pool. */
  poolSize: number;
}

export const DEFAULT_DB_LIMITS: DbLimits = { connectTimeoutMs: 5_000, queryTimeoutMs: 5_000, poolSize: 10 };

const READ_TIMEOUT = 'Query read timeout';

type Callback = (err: Error | null, result?: unknown) => void;

class BoundedClient extends pg.Client {
  // node-postgres overloads query (callback, promise, submittable); only the error path is wrapped.
  override query(...args: unknown[]): never {
    const last = args[args.length - 1];
    if (typeof last === 'function') {
      args[args.length - 1] = (err: Error | null, result?: unknown) => {
        if (err) this.dropIfTimedOut(err);
        (last as Callback)(err, result);
      };
    }
    const result = (pg.Client.prototype.query as (...a: unknown[]) => unknown).apply(this, args);
    if (result && typeof (result as Promise<unknown>).then === 'function') {
      return (result as Promise<unknown>).catch((err: Error) => {
        this.dropIfTimedOut(err);
        throw err;
      }) as never;
    }
    return result as never;
  }

  private dropIfTimedOut(err: Error): void {
    if (err.message !== READ_TIMEOUT) return;
    const stream = (this as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream;
    stream?.destroy();
  }
}

export function createPool(connectionString: string, limits: DbLimits): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    Client: BoundedClient,
    max: limits.poolSize,
    connectionTimeoutMillis: limits.connectTimeoutMs,
    query_timeout: limits.queryTimeoutMs,
    statement_timeout: limits.queryTimeoutMs,
    keepAlive: true,
    idleTimeoutMillis: 30_000,
  });
  // An idle connection the server dropped (restart, outage): the pool removes it; the next query opens a new one.
  pool.on('error', () => {});
  return pool;
}
