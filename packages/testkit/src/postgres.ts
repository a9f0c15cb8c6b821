import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { postgresVersion, startEmbeddedPostgres, type EmbeddedPostgresHandle } from '@tether/embedded-postgres';

export interface TestPostgres {
  /** URL of a fresh, empty database made for this test file. */
  url: string;
  server: EmbeddedPostgresHandle;
  /** Another fresh database on the same server. */
  createDatabase(): Promise<string>;
  stop(): Promise<void>;
}

let counter = 0;
let seed: Promise<string | undefined> | undefined;

/**
 * A cleanly stopped, empty cluster this machine's test files copy instead of running initdb each
 * (initdb is most of a test server's start). Made once per user and binaries, atomically (a folder
 * renamed into place), so concurrent first users each make one and one wins. No seed: initdb.
 */
function seedDataDir(): Promise<string | undefined> {
  seed ??= (async () => {
    const root = path.join(os.tmpdir(), `tether-pg-seed-${process.getuid?.() ?? 'user'}-${postgresVersion()}`);
    const done = path.join(root, 'data');
    if (existsSync(path.join(done, 'PG_VERSION'))) return done;
    const stage = await mkdtemp(path.join(os.tmpdir(), 'tether-pg-seeding-'));
    try {
      const server = await startEmbeddedPostgres({ dataDir: path.join(stage, 'data'), persistent: true });
      await server.stop();
      await mkdir(root, { recursive: true });
      // As root the cluster may live elsewhere (server.dataDir); a rename within /tmp is atomic, and a
      // concurrent maker's folder already in place makes ours fail harmlessly.
      await rename(server.dataDir, done).catch(() => rm(server.dataDir, { recursive: true, force: true }));
      return existsSync(path.join(done, 'PG_VERSION')) ? done : undefined;
    } catch {
      return undefined;
    } finally {
      await rm(stage, { recursive: true, force: true });
    }
  })();
  return seed;
}

/**
 * A test cluster is deleted after its file and never outlives a kernel crash, so it skips fsync: a commit's
 * WAL still reaches the OS before the commit returns (synchronous_commit stays on), so a SIGKILLed or frozen
 * server loses nothing a test counts on. With fsync on, a commit can wait behind a disk loaded by image builds: a
 * route attach in e2e-route-acme answered 503 DATABASE_UNAVAILABLE after the 5 s statement bound in one CI
 * run (cause unproven; the helpers now print the panel's warnings with such an answer).
 */
const THROWAWAY_SETTINGS = { fsync: 'off', full_page_writes: 'off' };

/**
 * A real PostgreSQL server (embedded-postgres) for one test file, with a fresh
 * database. Call `stop()` in `afterAll`; it deletes the cluster.
 */
export async function startTestPostgres(): Promise<TestPostgres> {
  const base = await mkdtemp(path.join(os.tmpdir(), 'tether-pg-'));
  const seedDir = await seedDataDir();
  const server = await startEmbeddedPostgres({
    dataDir: path.join(base, 'data'),
    persistent: false,
    settings: THROWAWAY_SETTINGS,
    ...(seedDir ? { seedDataDir: seedDir } : {}),
  });
  const createDatabase = async () => server.createDatabase(`test_${process.pid}_${++counter}`);
  const url = await createDatabase();
  return {
    url,
    server,
    createDatabase,
    async stop() {
      // The cluster is deleted next: no checkpoint needed.
      await server.stop({ immediate: true });
      await rm(base, { recursive: true, force: true });
    },
  };
}
