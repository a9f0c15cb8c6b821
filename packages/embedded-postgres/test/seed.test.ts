import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../src/index.js';

// A seed (a stopped cluster) replaces initdb for a new data folder: what is in the seed is in the copy,
// and the copy is the new cluster's own (the seed is not written to).

const dirs: string[] = [];
const tmp = async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-pg-seed-test-'));
  dirs.push(dir);
  return dir;
};
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

const query = async (url: string, sql: string) => {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
};

const portOpen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });

describe('seedDataDir', () => {
  it('copies the seed instead of running initdb; the copy is independent of the seed', async () => {
    const seedServer = await startEmbeddedPostgres({ dataDir: path.join(await tmp(), 'data'), persistent: true });
    await seedServer.createDatabase('from_seed');
    await seedServer.stop();

    const copy = await startEmbeddedPostgres({ dataDir: path.join(await tmp(), 'data'), persistent: false, seedDataDir: seedServer.dataDir });
    const names = (await query(copy.url, 'SELECT datname FROM pg_database')).map((r) => r.datname as string);
    expect(names).toContain('from_seed');
    await copy.createDatabase('only_in_copy');
    await copy.stop({ immediate: true });
    expect(await portOpen(copy.port)).toBe(false);

    const again = await startEmbeddedPostgres({ dataDir: path.join(await tmp(), 'data'), persistent: false, seedDataDir: seedServer.dataDir });
    const namesAgain = (await query(again.url, 'SELECT datname FROM pg_database')).map((r) => r.datname as string);
    expect(namesAgain).toContain('from_seed');
    expect(namesAgain).not.toContain('only_in_copy');
    await again.stop();
  }, 60_000);
});
