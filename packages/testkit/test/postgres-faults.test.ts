import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFaultablePostgres, type FaultablePostgres } from '../src/index.js';

// The outage kit: a stopped server refuses at once, a frozen one accepts
// nothing within any deadline, and both come back with their data.

let server: FaultablePostgres;

async function select(url: string, timeoutMs = 2_000): Promise<number> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  client.on('error', () => {});
  try {
    await client.connect();
    return Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM kept')).rows[0]!.n);
  } finally {
    void client.end().catch(() => {});
  }
}

beforeAll(async () => {
  server = await startFaultablePostgres();
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  await client.query('CREATE TABLE kept (id int); INSERT INTO kept VALUES (1), (2)');
  await client.end();
});
afterAll(async () => server?.destroy());

describe('faultable PostgreSQL', () => {
  it('stop() is an immediate shutdown: connections are refused at once; start() brings the same data back', async () => {
    const open = new pg.Client({ connectionString: server.url });
    const cut = new Promise<Error>((resolve) => open.on('error', resolve));
    await open.connect();
    await server.stop();
    expect(server.state).toBe('stopped');
    expect((await cut).message).toMatch(/terminat/i);
    const started = performance.now();
    await expect(select(server.url)).rejects.toThrow(/ECONNREFUSED/);
    expect(performance.now() - started).toBeLessThan(500);
    await server.start();
    expect(server.state).toBe('running');
    expect(await select(server.url)).toBe(2);
  });

  it('freeze() hangs the server with its sockets open (a deadline is the only way out); thaw() resumes it', async () => {
    server.freeze();
    expect(server.state).toBe('frozen');
    const started = performance.now();
    await expect(select(server.url, 700)).rejects.toThrow(/timeout/i);
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(650);
    expect(took).toBeLessThan(2_000);
    server.thaw();
    expect(await select(server.url)).toBe(2);
  });
});
