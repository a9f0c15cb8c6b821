import pg from 'pg';
import type { DatabaseHost } from './database-hosts.js';
import { isDatabaseUnavailable, isNotPrimary, type DbHealth } from './db-faults.js';
import { PRIMARY_CHECK_SQL, type PrimaryCheckRow, type PrimaryLocator } from './primary-locator.js';

// The pool under Prisma, with the bounds a frozen server cannot enforce: a
// connect/acquire deadline, a per-query deadline on the client side
// (query_timeout) and the same on the server (statement_timeout), TCP
// keepalive. node-postgres leaves a connection whose query timed out busy with
// that query: BoundedClient destroys its socket instead, so the pool drops it
// and nothing later runs behind a query that will never answer. Each new
// connection goes to the server the locator names (several hosts in
// DATABASE_URL, issue 39) and is checked in the same round trip as its time
// zone; a read-only answer later (25006) or a lost connection makes the
// locator look again before the next connect.

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

/** The health every client of one pool reports to (set per pool by createPool's subclass). */
class BoundedClient extends pg.Client {
  protected health: DbHealth | undefined;
  protected locator: PrimaryLocator | undefined;
  private server: DatabaseHost | undefined;

  constructor(config?: string | pg.ClientConfig) {
    super(config);
    // A connection lost while it is checked out (the server gone, or observe() below destroying it after a read
    // timeout) makes node-postgres emit 'error' on the client, and pg-pool listens only while a client is idle:
    // unheard, that event was an uncaught exception (seen in db-bounds.test: "Connection terminated
    // unexpectedly"), a dead panel. Heard here; the pool drops the client on release (it is no longer queryable).
    this.on('error', (err: Error) => {
      if (!isDatabaseUnavailable(err)) return;
      this.health?.down();
      if (this.server) this.locator?.forget(this.server);
    });
  }

  /**
   * Connects, then sets the session's time zone to UTC before the connection is anyone's: Prisma's DateTime
   * columns are `timestamp` (without time zone) holding UTC and raw statements pass times as timestamptz, which
   * PostgreSQL converts in the session's zone, so on a server or database set to another zone those times
   * shifted by its offset. pg-pool connects with a callback; the promise form is kept for other callers.
   */
  override connect(...args: unknown[]): never {
    const ready = this.aim()
      .then(() => (pg.Client.prototype.connect as unknown as () => Promise<unknown>).call(this))
      .then(() => (pg.Client.prototype.query as (text: string) => Promise<unknown>).call(this, `SET TIME ZONE 'UTC'; ${PRIMARY_CHECK_SQL}`))
      .then((results) => {
        const rows = Array.isArray(results) ? (results[1] as { rows: PrimaryCheckRow[] } | undefined)?.rows : undefined;
        if (this.locator && this.server) this.locator.accept(this.server, rows?.[0]);
      })
      .catch((err: unknown) => {
        if (this.server) this.locator?.forget(this.server);
        throw err;
      });
    const callback = args[0];
    if (typeof callback !== 'function') return ready as never;
    ready.then(
      () => (callback as (err?: Error) => void)(),
      (err: Error) => (callback as (err?: Error) => void)(err),
    );
    return undefined as never;
  }

  /** Points this client at the server the locator names (node-postgres reads host and port when it connects). */
  private async aim(): Promise<void> {
    if (!this.locator) return;
    const server = await this.locator.target();
    this.server = server;
    const self = this as unknown as { host: string; port: number; connectionParameters: { host: string; port: number } };
    self.host = self.connectionParameters.host = server.host;
    self.port = self.connectionParameters.port = server.port;
  }

  // node-postgres overloads query (callback, promise, submittable); only the error path is wrapped.
  override query(...args: unknown[]): never {
    const first = args[0];
    this.health?.sent(typeof first === 'object' && first !== null && 'text' in first ? (first as { text: unknown }).text : first);
    const last = args[args.length - 1];
    if (typeof last === 'function') {
      args[args.length - 1] = (err: Error | null, result?: unknown) => {
        this.observe(err);
        (last as Callback)(err, result);
      };
    }
    const result = (pg.Client.prototype.query as (...a: unknown[]) => unknown).apply(this, args);
    if (result && typeof (result as Promise<unknown>).then === 'function') {
      return (result as Promise<unknown>).then(
        (value) => {
          this.observe(null);
          return value;
        },
        (err: Error) => {
          this.observe(err);
          throw err;
        },
      ) as never;
    }
    return result as never;
  }

  private observe(err: Error | null): void {
    if (!err) return this.health?.up();
    if (isDatabaseUnavailable(err)) this.health?.down();
    if (isNotPrimary(err) && this.server) this.locator?.forget(this.server);
    if (err.message !== READ_TIMEOUT && !isNotPrimary(err)) return;
    const stream = (this as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream;
    stream?.destroy();
  }
}

/** A pool whose clients and connection attempts report to `health`. */
export function createPool(locator: PrimaryLocator, limits: DbLimits, health: DbHealth): pg.Pool {
  class Client extends BoundedClient {
    protected override health = health;
    protected override locator = locator;
  }
  const pool = new ObservedPool(health, {
    // User, password, database and parameters; the host is chosen per connection (aim above).
    connectionString: locator.hosts[0]!.url,
    Client,
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

/** Counts a failed acquire (refused, connect or acquire timeout) as the database being down. */
class ObservedPool extends pg.Pool {
  constructor(
    private readonly health: DbHealth,
    config: pg.PoolConfig,
  ) {
    super(config);
  }

  override connect(...args: unknown[]): never {
    const cb = args[0];
    if (typeof cb === 'function') {
      return (pg.Pool.prototype.connect as (...a: unknown[]) => never).call(this, (err: Error | undefined, ...rest: unknown[]) => {
        if (err && isDatabaseUnavailable(err)) this.health.down();
        (cb as (...a: unknown[]) => void)(err, ...rest);
      });
    }
    return (pg.Pool.prototype.connect as () => Promise<pg.PoolClient>).call(this).catch((err: Error) => {
      if (isDatabaseUnavailable(err)) this.health.down();
      throw err;
    }) as never;
  }
}
