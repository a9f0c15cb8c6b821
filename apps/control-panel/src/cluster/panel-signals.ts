import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { Logger } from '@tether/common';
import { sqlOf, type Db } from '../db/database.js';
import { connectToPrimary, type PrimaryLocator } from '../db/primary-locator.js';

// Signals between panels: PostgreSQL LISTEN/NOTIFY on one channel, on a
// dedicated connection outside Prisma's pool (a transaction-mode pooler
// cannot carry LISTEN; docs/operations.md). Payloads carry ids only:
// `kind:sender:id[,id…]`, under NOTIFY's 8,000-byte limit. NOTIFY is not
// durable: what is sent while this connection is down is lost, so every
// (re)connect emits `connected` and the owner rescans what it owns.
// Signals are sent on that same connection while it is up: a cross-panel
// deploy waits on two of them, and on the pool they queued behind the batch
// writers' statements and paid Prisma's per-query cost (docs/benchmarks.md,
// issue 10); the pool is the fallback while LISTEN reconnects.

export const CHANNEL = 'tether_panels';
/** Every write of a `deployments` row NOTIFYs its id here (a trigger: any panel, any version). */
export const DEPLOYMENTS_CHANNEL = 'tether_deployments';
/** Under PostgreSQL's 8,000-byte NOTIFY payload limit, with room for the prefix. */
const MAX_PAYLOAD = 7_000;

export type SignalKind =
  /** A node was claimed: `owner:panel:nodeId/generation`. */
  | 'owner'
  /** Deploy this (a pending deployment of a node the target panel owns): `deploy:target:deploymentId`. */
  | 'deploy'
  /** A deployment dispatched on request reached its next state: `deployed:panel:deploymentId[/delivered]` (cluster-dispatcher.ts). */
  | 'deployed'
  | 'routing'
  | 'workloads'
  /** Sent by panels before the report rows needed no signal (nothing acts on it): still parsed, ignored. */
  | 'report'
  /** Tokens revoked on the sending panel: `revoked:panel:tokenId[,…]` (their streams and waits end everywhere). */
  | 'revoked'
  /** Fleet-page cookies signed out on the sending panel: `signed-out:panel:cookieId/expiresAtMs[,…]`. */
  | 'signed-out'
  /** The scheduler changed these nodes' allocations: `allocations:holder:nodeId[,…]` (the panel holding each session sends its frame). */
  | 'allocations'
  /** Evaluate soon (a change made on the sending panel): `schedule:panel:nodeId-or-reason[,…]`; only the scheduler's holder acts. */
  | 'schedule'
  /** Nodes decommissioned (or declared lost) on the sending panel: `decommissioned:panel:nodeId[,…]` (a session held elsewhere closes with 4005). */
  | 'decommissioned';

export interface Signal {
  kind: SignalKind;
  /** The sender, or for `deploy` the panel asked to send. */
  panel: string;
  ids: string[];
}

export interface PanelSignalEvents {
  signal: [Signal];
  /** A deployment row was written (by any panel): its id. */
  deployment: [string];
  /** LISTEN is (again) in place: what was sent meanwhile is lost; rescan. */
  connected: [];
}

export function parseSignal(payload: string): Signal | undefined {
  const first = payload.indexOf(':');
  const second = payload.indexOf(':', first + 1);
  if (first < 0 || second < 0) return undefined;
  const kind = payload.slice(0, first) as SignalKind;
  if (!['owner', 'deploy', 'deployed', 'routing', 'workloads', 'report', 'revoked', 'signed-out', 'allocations', 'schedule', 'decommissioned'].includes(kind)) return undefined;
  const ids = payload.slice(second + 1).split(',').filter(Boolean);
  return { kind, panel: payload.slice(first + 1, second), ids };
}

export class PanelSignals extends EventEmitter<PanelSignalEvents> {
  private client: pg.Client | undefined;
  private stopped = true;
  private retry: NodeJS.Timeout | undefined;
  private attempt = 0;
  /** The last statement sent on the LISTEN connection: the next waits for it. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly options: { servers: PrimaryLocator; prisma: Db; connectTimeoutMs: number; queryTimeoutMs: number; logger: Logger; panelId: string },
  ) {
    super();
  }

  get listening(): boolean {
    return this.client !== undefined;
  }

  start(): void {
    this.stopped = false;
    void this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }

  /** Sends ids to the other panels, in as many notifications as the payload limit needs. Never throws. */
  async send(kind: SignalKind, panel: string, ids: readonly string[]): Promise<void> {
    const prefix = `${kind}:${panel}:`;
    const payloads: string[] = [];
    let current = '';
    for (const id of ids) {
      if (current && prefix.length + current.length + id.length + 1 > MAX_PAYLOAD) {
        payloads.push(prefix + current);
        current = '';
      }
      current = current ? `${current},${id}` : id;
    }
    if (current) payloads.push(prefix + current);
    for (const payload of payloads) {
      try {
        await this.query('SELECT pg_notify($1, $2)', [CHANNEL, payload]);
      } catch (err) {
        this.options.logger.warn({ err, kind }, 'could not signal the other panels');
      }
    }
  }

  /**
   * The node's owner, another panel whose lease is live by PostgreSQL's clock, asked in the same statement
   * to send the deployment (`deploy:owner:deploymentId`): one round trip. None: undefined, nothing sent.
   * Throws when the database does not answer.
   */
  async askOwner(nodeId: string, deploymentId: string): Promise<string | undefined> {
    const rows = await this.query<{ panel_id: string }>(
      `SELECT w.panel_id, pg_notify($1, 'deploy:' || w.panel_id || ':' || $2::text) FROM node_owners w JOIN panels p ON p.id = w.panel_id
       WHERE w.node_id = $3 AND p.lease_until > now() AND w.panel_id <> $4`,
      [CHANNEL, deploymentId, nodeId, this.options.panelId],
    );
    return rows[0]?.panel_id;
  }

  /**
   * A statement on the LISTEN connection while it is up (bounded by its query timeout; one that fails drops
   * the connection, which reconnects and rescans), else on the pool. Never both: a NOTIFY that may have
   * committed is not sent twice.
   */
  private async query<T>(sql: string, params: unknown[]): Promise<T[]> {
    const client = this.client;
    if (!client) return sqlOf(this.options.prisma).rows<T>(sql, params);
    // One statement at a time on the connection (node-postgres is dropping its implicit queue).
    const run = this.queue.then(() => client.query(sql, params));
    this.queue = run.then(
      () => undefined,
      () => undefined,
    );
    try {
      return (await run).rows as T[];
    } catch (err) {
      this.drop(client, err as Error);
      throw err;
    }
  }

  private drop(client: pg.Client, err?: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.options.logger.warn({ err }, 'LISTEN connection lost; reconnecting');
    client.end().catch(() => {});
    this.schedule();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    let client: pg.Client | undefined;
    const make = (url: string) => {
      const made = new pg.Client({
        connectionString: url,
        connectionTimeoutMillis: this.options.connectTimeoutMs,
        // Signals are sent here too: a frozen server fails them (and drops the connection) instead of hanging a deploy.
        query_timeout: this.options.queryTimeoutMs,
        keepAlive: true,
        application_name: `tether-listen-${this.options.panelId}`,
      });
      const lost = (err?: Error) => this.drop(made, err);
      made.on('error', lost);
      made.on('end', () => lost());
      made.on('notification', (n) => {
        if (n.channel === DEPLOYMENTS_CHANNEL && n.payload) return void this.emit('deployment', n.payload);
        if (n.channel !== CHANNEL || !n.payload) return;
        const signal = parseSignal(n.payload);
        if (signal) this.emit('signal', signal);
      });
      return (client = made);
    };
    try {
      // The primary the pool writes to (primary-locator.ts): NOTIFY is sent there, so LISTEN must be there too.
      await connectToPrimary(this.options.servers, make);
      await client!.query(`LISTEN ${CHANNEL}`);
      await client!.query(`LISTEN ${DEPLOYMENTS_CHANNEL}`);
    } catch (err) {
      client?.removeAllListeners('end');
      await client?.end().catch(() => {});
      this.options.logger.warn({ err }, 'LISTEN failed; retrying');
      this.schedule();
      return;
    }
    if (this.stopped) {
      await client!.end().catch(() => {});
      return;
    }
    this.client = client;
    this.attempt = 0;
    this.emit('connected');
  }

  private schedule(): void {
    if (this.stopped) return;
    const delay = Math.min(2_000, 100 * 2 ** this.attempt++) * (0.5 + Math.random() / 2);
    this.retry = setTimeout(() => void this.connect(), delay);
    this.retry.unref();
  }
}
