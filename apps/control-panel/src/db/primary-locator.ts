import pg from 'pg';
import type { Logger } from '@tether/common';
import { parseDatabaseHosts, type DatabaseHost } from './database-hosts.js';

// Which of the servers in DATABASE_URL the panel writes to (issue 39). The
// pool, the lease connection and LISTEN each ask `target()` before they
// connect and `verify()` what they reached, so all three follow one choice:
// the server that accepts writes (not in recovery) on the highest timeline
// this panel has seen. A server on a lower timeline is an old primary back
// after a promotion (split brain) and is refused even when it accepts writes.
// With one host (a proxy or cloud endpoint that moves) nothing is probed: a
// read-only answer or a lower timeline on connect says "not the primary".
// The timeline is read from the current WAL file name: pg_control_checkpoint()
// keeps the old timeline until the first checkpoint after a promotion.

/** One round trip after connecting: recovery state, and on a primary its timeline. */
export const PRIMARY_CHECK_SQL =
  "SELECT pg_is_in_recovery() AS recovery, CASE WHEN pg_is_in_recovery() THEN NULL ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END AS timeline";

export interface PrimaryCheckRow {
  recovery: boolean;
  timeline: number | null;
}

/** The server reached does not accept writes, is older than one seen, or none of the servers answered as a primary. */
export class NotPrimaryError extends Error {
  readonly code = 'DATABASE_NOT_PRIMARY';
  constructor(message: string) {
    super(message);
    this.name = 'NotPrimaryError';
  }
}

export interface PrimaryLocatorOptions {
  /** Connect + check bound of one probe of one server. */
  probeTimeoutMs: number;
  logger?: Pick<Logger, 'warn' | 'error' | 'info'>;
}

export interface PrimaryView {
  host: string;
  port: number;
  timeline: number;
}

export class PrimaryLocator {
  #current: (DatabaseHost & { timeline: number }) | undefined;
  #highest = 0;
  #probing: Promise<DatabaseHost> | undefined;
  /** Moves from one server or timeline to another after the first. */
  failovers = 0;
  /** Servers refused for a timeline lower than one seen (an old primary back). */
  staleRefused = 0;
  /** Told when the primary (server or timeline) changes. */
  onChange: ((now: PrimaryView) => void) | undefined;

  constructor(
    readonly hosts: readonly DatabaseHost[],
    private readonly options: PrimaryLocatorOptions,
  ) {
    if (hosts.length === 0) throw new Error('PrimaryLocator needs at least one host');
  }

  /** A locator for the servers of a (possibly multi-host) DATABASE_URL. */
  static forUrl(databaseUrl: string, probeTimeoutMs: number): PrimaryLocator {
    return new PrimaryLocator(parseDatabaseHosts(databaseUrl), { probeTimeoutMs });
  }

  /** The server written to now (after its last check), if any. */
  get current(): PrimaryView | undefined {
    const c = this.#current;
    return c && { host: c.host, port: c.port, timeline: c.timeline };
  }

  /** The highest timeline seen on a primary by this process. */
  get highestTimeline(): number {
    return this.#highest;
  }

  /** The server to connect to: the known primary, the only host, or the one probing every host finds. */
  async target(): Promise<DatabaseHost> {
    if (this.#current) return this.#current;
    if (this.hosts.length === 1) return this.hosts[0]!;
    return (this.#probing ??= this.probe().finally(() => (this.#probing = undefined)));
  }

  /** Judges a check row of a connection to `host`: returns, or throws NotPrimaryError (and forgets `host`). */
  accept(host: DatabaseHost, row: PrimaryCheckRow | undefined): void {
    const verdict = this.judge(row);
    if (verdict !== 'ok') {
      this.forget(host);
      throw new NotPrimaryError(`${host.host}:${host.port} ${verdict}`);
    }
    this.adopt(host, row!.timeline!);
  }

  /** A connection to `host` got a read-only answer or a stale verdict: the next target() looks again. */
  forget(host: Pick<DatabaseHost, 'url'>): void {
    if (this.#current?.url === host.url) this.#current = undefined;
  }

  private judge(row: PrimaryCheckRow | undefined): 'ok' | string {
    if (!row) return 'did not answer the primary check';
    if (row.recovery) return 'is in recovery (a standby): it does not accept writes';
    const timeline = Number(row.timeline);
    if (!Number.isInteger(timeline) || timeline < 1) return 'did not name its timeline';
    if (timeline < this.#highest) {
      this.staleRefused++;
      this.options.logger?.error({ timeline, highestSeen: this.#highest }, 'refusing a database server on an older timeline (an old primary back after a promotion)');
      return `is on timeline ${timeline}, older than timeline ${this.#highest} seen before (an old primary): refused`;
    }
    return 'ok';
  }

  private adopt(host: DatabaseHost, timeline: number): void {
    const before = this.#current;
    const moved = this.#highest > 0 && (timeline !== this.#highest || (before !== undefined && (before.host !== host.host || before.port !== host.port)));
    this.#highest = Math.max(this.#highest, timeline);
    this.#current = { ...host, timeline };
    if (moved) {
      this.failovers++;
      this.options.logger?.warn({ server: `${host.host}:${host.port}`, timeline }, 'database primary changed');
      this.onChange?.({ host: host.host, port: host.port, timeline });
    } else if (!before) this.onChange?.({ host: host.host, port: host.port, timeline });
  }

  /** Every host at once; the writable one on the highest timeline wins (list order breaks a tie). */
  private async probe(): Promise<DatabaseHost> {
    const results = await Promise.all(this.hosts.map((host) => this.check(host)));
    const writable = results.filter((r) => r.row && !r.row.recovery && Number.isInteger(r.row.timeline));
    const best = writable.reduce<(typeof writable)[number] | undefined>((a, r) => (a && a.row!.timeline! >= r.row!.timeline! ? a : r), undefined);
    if (!best) {
      const why = results.map((r) => `${r.host.host}:${r.host.port} ${r.error ?? 'is in recovery'}`).join('; ');
      throw new NotPrimaryError(`no database server accepts writes: ${why}`);
    }
    this.accept(best.host, best.row);
    return best.host;
  }

  private async check(host: DatabaseHost): Promise<{ host: DatabaseHost; row?: PrimaryCheckRow; error?: string }> {
    const client = new pg.Client({
      connectionString: host.url,
      connectionTimeoutMillis: this.options.probeTimeoutMs,
      query_timeout: this.options.probeTimeoutMs,
      application_name: 'tether-primary-probe',
    });
    client.on('error', () => {});
    try {
      await client.connect();
      const result = await client.query<PrimaryCheckRow>(PRIMARY_CHECK_SQL);
      return { host, row: result.rows[0]! };
    } catch (err) {
      return { host, error: `unreachable (${(err as Error).message})` };
    } finally {
      await client.end().catch(() => {});
    }
  }
}

/**
 * Connects a single client (the lease's, LISTEN's) to the primary: `make` builds it for the target's one-host
 * URL (and attaches its error listener first); a connect failure or a failed check forgets that server.
 */
export async function connectToPrimary(locator: PrimaryLocator, make: (url: string) => pg.Client): Promise<pg.Client> {
  const host = await locator.target();
  const client = make(host.url);
  try {
    await client.connect();
    const result = await client.query<PrimaryCheckRow>(PRIMARY_CHECK_SQL);
    locator.accept(host, result.rows[0]);
    return client;
  } catch (err) {
    locator.forget(host);
    await client.end().catch(() => {});
    throw err;
  }
}
