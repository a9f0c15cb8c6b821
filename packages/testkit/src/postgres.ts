import { mkdtemp } from 'node:fs/promises';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from '@tether/embedded-postgres';

export interface TestPostgres {
  /** URL of a fresh, empty database made for this test file. */
  url: string;
  server: EmbeddedPostgresHandle;
  /** Another fresh database on the same server. */
  createDatabase(): Promise<string>;
  stop(): Promise<void>;
}

let counter = 0;

/**
 * A real PostgreSQL server (embedded-postgres) for one test file, with a fresh
 * database. Call `stop()` in `afterAll`; it deletes the cluster.
 */
export async function startTestPostgres(): Promise<TestPostgres> {
  const base = await mkdtemp(path.join(os.tmpdir(), 'tether-pg-'));
  const server = await startEmbeddedPostgres({ dataDir: path.join(base, 'data'), persistent: false });
  const createDatabase = async () => server.createDatabase(`test_${process.pid}_${++counter}`);
  const url = await createDatabase();
  return {
    url,
    server,
    createDatabase,
    async stop() {
      await server.stop();
      await rm(base, { recursive: true, force: true });
    },
  };
}
