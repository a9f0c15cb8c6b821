import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { appendFile, chown, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from '@tether/embedded-postgres';
import { startTcpRelay, type TcpRelay } from './tcp-relay.js';

// A primary and a streaming standby made the way an operator makes one: a copy
// of the primary's data folder taken between pg_backup_start and
// pg_backup_stop, with backup_label, standby.signal and primary_conninfo. The
// primary can be SIGKILLed (a crash, not a shutdown), the standby promoted with
// pg_promote(), and the old primary started again on its old port, writable,
// on its old timeline (split brain). Real servers, loopback only.

const execFileAsync = promisify(execFile);

export interface PostgresPair {
  primary: PairServer;
  standby: PairServer & {
    /** pg_promote(): resolves once the standby accepts writes. */
    promote(): Promise<void>;
  };
  /** With `replicationRelay`: the link the standby streams through; pause() holds back what the standby has not got. */
  replication: TcpRelay | undefined;
  /** One URL naming both servers (libpq's host list), for `database`. */
  bothUrl(database: string): string;
  /** Makes `database` on the primary (replicated to the standby). */
  createDatabase(database: string): Promise<void>;
  /**
   * synchronous_standby_names = 'ANY 1 (tether_standby)' on the primary: a commit returns once the standby
   * has it. Resolves once the standby is streaming as a synchronous one.
   */
  makeSynchronous(): Promise<void>;
  stop(): Promise<void>;
}

export interface PairServer {
  readonly port: number;
  url(database: string): string;
  /** SIGKILL to the postmaster (its backends follow). */
  kill(): Promise<void>;
  /** Starts the server again on the same folder and port (after kill). */
  restart(): Promise<void>;
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, database?: string): Promise<R[]>;
}

const USER = 'tether';
const PASSWORD = 'tether';
const STANDBY_NAME = 'tether_standby';

export async function startPostgresPair(options: { replicationRelay?: boolean } = {}): Promise<PostgresPair> {
  const base = await mkdtemp(path.join(os.tmpdir(), 'tether-pg-pair-'));
  // Keep the WAL the standby may still need while it copies and catches up.
  const settings = { wal_keep_size: '256MB', wal_level: 'replica', max_wal_senders: '4', hot_standby: 'on' };
  let primary = await startEmbeddedPostgres({ dataDir: path.join(base, 'primary'), persistent: true, user: USER, password: PASSWORD, settings });
  const primaryPort = primary.port;
  const primaryDir = primary.dataDir;
  const standbyDir = path.join(path.dirname(primaryDir), `${path.basename(primaryDir)}-standby`);

  const replication = options.replicationRelay ? await startTcpRelay(primaryPort) : undefined;
  await copyForStandby(primary, standbyDir, replication?.port ?? primaryPort);
  let standby = await startEmbeddedPostgres({ dataDir: standbyDir, persistent: true, user: USER, password: PASSWORD, settings });
  const standbyPort = standby.port;

  const server = (get: () => EmbeddedPostgresHandle, set: (h: EmbeddedPostgresHandle) => void, port: number): PairServer => ({
    port,
    url: (database) => get().urlFor(database),
    async kill() {
      const pid = Number(readFileSync(path.join(get().dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      process.kill(pid, 'SIGKILL');
      await waitGone(pid);
    },
    async restart() {
      // The killed postmaster's backends notice it gone and exit; until then its shared memory is in use.
      for (let attempt = 1; ; attempt++) {
        try {
          set(await startEmbeddedPostgres({ dataDir: get().dataDir, port, persistent: true, user: USER, password: PASSWORD, settings }));
          return;
        } catch (err) {
          if (attempt >= 25) throw err;
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    },
    query: (sql, database = 'postgres') => query(get().urlFor(database), sql),
  });
  const primaryServer = server(() => primary, (h) => (primary = h), primaryPort);
  const standbyServer = server(() => standby, (h) => (standby = h), standbyPort);

  return {
    primary: primaryServer,
    standby: {
      ...standbyServer,
      async promote() {
        await query(standby.urlFor('postgres'), 'SELECT pg_promote(true, 30)');
      },
    },
    replication,
    bothUrl: (database) => `postgresql://${USER}:${PASSWORD}@127.0.0.1:${primaryPort},127.0.0.1:${standbyPort}/${encodeURIComponent(database)}`,
    async createDatabase(database) {
      await query(primary.urlFor('postgres'), `CREATE DATABASE "${database}"`);
    },
    async makeSynchronous() {
      await query(primary.urlFor('postgres'), `ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 (${STANDBY_NAME})'`);
      await query(primary.urlFor('postgres'), 'SELECT pg_reload_conf()');
      const deadline = Date.now() + 15_000;
      for (;;) {
        const rows = await query<{ sync_state: string }>(primary.urlFor('postgres'), `SELECT sync_state FROM pg_stat_replication WHERE application_name = '${STANDBY_NAME}'`);
        if (rows[0]?.sync_state === 'quorum' || rows[0]?.sync_state === 'sync') return;
        if (Date.now() > deadline) throw new Error(`the standby did not become synchronous (${JSON.stringify(rows)})`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop() {
      for (const h of [standby, primary]) await h.stop({ immediate: true }).catch(() => {});
      await replication?.close();
      await rm(standbyDir, { recursive: true, force: true });
      await rm(primaryDir, { recursive: true, force: true });
      await rm(base, { recursive: true, force: true });
    },
  };
}

async function query<R extends pg.QueryResultRow>(url: string, sql: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query<R>(sql)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The base backup: the folder copied between pg_backup_start and pg_backup_stop of one session. */
async function copyForStandby(primary: EmbeddedPostgresHandle, standbyDir: string, primaryPort: number): Promise<void> {
  const client = new pg.Client({ connectionString: primary.urlFor('postgres') });
  await client.connect();
  try {
    await client.query(`SELECT pg_backup_start('tether-standby', true)`);
    await execFileAsync('cp', ['-a', primary.dataDir, standbyDir]);
    const { rows } = await client.query<{ labelfile: string }>('SELECT labelfile FROM pg_backup_stop(true)');
    const owner = await stat(standbyDir);
    const own = (file: string) => chown(file, owner.uid, owner.gid);
    for (const stale of ['postmaster.pid', 'postmaster.opts']) await rm(path.join(standbyDir, stale), { force: true });
    await writeFile(path.join(standbyDir, 'backup_label'), rows[0]!.labelfile);
    await own(path.join(standbyDir, 'backup_label'));
    await writeFile(path.join(standbyDir, 'standby.signal'), '');
    await own(path.join(standbyDir, 'standby.signal'));
    await appendFile(
      path.join(standbyDir, 'postgresql.auto.conf'),
      `primary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=${USER} password=${PASSWORD} application_name=${STANDBY_NAME}'\n`,
    );
  } finally {
    await client.end().catch(() => {});
  }
}

async function waitGone(pid: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`postgres ${pid} still runs 10 s after SIGKILL`);
}
