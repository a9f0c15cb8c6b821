import net from 'node:net';
import { readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import {
  TEST_IMAGE,
  blackhole,
  dockerApi,
  ensureCaddy,
  ensureDocker,
  ensureIptables,
  freePort,
  requireSystem,
  startCaddy,
  startTestPostgres,
  sweepBlackholes,
  waitFor,
} from '../src/index.js';

describe('postgres', () => {
  it('gives a real, fresh database and removes it on stop', async () => {
    const db = await startTestPostgres();
    try {
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      const { rows } = await client.query<{ v: string; n: string }>(
        "select current_setting('server_version_num') as v, (select count(*) from pg_tables where schemaname = 'public') as n",
      );
      await client.end();
      expect(Number(rows[0]!.v)).toBeGreaterThanOrEqual(180000);
      expect(Number(rows[0]!.n)).toBe(0);
      const other = await db.createDatabase();
      expect(other).not.toBe(db.url);
    } finally {
      await db.stop();
    }
    const refused = new pg.Client({ connectionString: db.url, connectionTimeoutMillis: 2_000 });
    await expect(refused.connect()).rejects.toThrow();
  });
});

describe('free ports', () => {
  it('returns a port that can be bound at once', async () => {
    const port = await freePort();
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
    await new Promise((resolve) => server.close(resolve));
    expect(port).toBeGreaterThan(0);
  });
});

const docker = await ensureDocker();
describe.skipIf(!docker.available)('docker', () => {
  it('runs the local test image', async () => {
    const create = await dockerApi(
      'POST',
      '/containers/create',
      JSON.stringify({ Image: TEST_IMAGE, Cmd: ['sh', '-c', 'echo ready'], Labels: { 'tether.test': 'testkit' } }),
    );
    expect(create.status).toBe(201);
    const { Id } = JSON.parse(create.body) as { Id: string };
    try {
      expect((await dockerApi('POST', `/containers/${Id}/start`)).status).toBe(204);
      const wait = await dockerApi('POST', `/containers/${Id}/wait`);
      expect(JSON.parse(wait.body)).toMatchObject({ StatusCode: 0 });
    } finally {
      await dockerApi('DELETE', `/containers/${Id}?force=1`);
    }
  });
});

const caddy = await ensureCaddy();
describe.skipIf(!caddy.available)('caddy', () => {
  it('starts on free ports, serves a loaded config, and restarts empty', async () => {
    const instance = await startCaddy();
    try {
      const config = {
        admin: { listen: `127.0.0.1:${instance.adminPort}` },
        apps: {
          http: {
            servers: {
              test: {
                listen: [`127.0.0.1:${instance.httpPort}`],
                automatic_https: { disable: true },
                routes: [{ handle: [{ handler: 'static_response', body: 'from caddy' }] }],
              },
            },
          },
        },
      };
      const load = await fetch(`${instance.adminUrl}/load`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(config) });
      expect(load.status).toBe(200);
      expect(await (await fetch(`http://127.0.0.1:${instance.httpPort}/`)).text()).toBe('from caddy');
      await instance.restartEmpty();
      const running = (await (await fetch(`${instance.adminUrl}/config/`)).json()) as { apps?: unknown };
      expect(running).toMatchObject({ admin: { listen: `127.0.0.1:${instance.adminPort}` } });
      expect(running.apps).toBeUndefined();
    } finally {
      await instance.stop();
    }
  });
});

const iptables = await ensureIptables();
describe.skipIf(!iptables.available)('loopback blackhole', () => {
  const servers: net.Server[] = [];
  afterAll(() => {
    for (const s of servers) s.close();
  });

  it('silences one connection in both directions without FIN or RST, and release restores it', async () => {
    const received: string[] = [];
    let serverSide: net.Socket | undefined;
    const server = net.createServer((socket) => {
      serverSide = socket;
      socket.on('data', (d) => received.push(d.toString()));
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const client = net.connect(port, '127.0.0.1');
    await new Promise((resolve) => client.once('connect', resolve));
    await waitFor(() => serverSide);
    let clientClosed = false;
    client.on('close', () => (clientClosed = true));
    client.on('error', () => undefined);

    const hole = blackhole(client.localPort!);
    try {
      client.write('lost?');
      serverSide!.write('back?');
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(received).toEqual([]);
      expect(clientClosed).toBe(false);
      expect(serverSide!.destroyed).toBe(false);
    } finally {
      hole.release();
    }
    // TCP retransmits once the path is back: the held bytes arrive, nothing was reset.
    await waitFor(() => received.join('') === 'lost?', { timeoutMs: 10_000 });
    client.destroy();
  });

  it('leaves no rules behind', () => {
    blackhole(1);
    expect(sweepBlackholes()).toBeGreaterThanOrEqual(2);
    expect(sweepBlackholes()).toBe(0);
  });
});

describe('missing system dependencies', () => {
  const skipsFile = path.join(os.tmpdir(), `tether-skips-${process.pid}.jsonl`);
  afterAll(() => rmSync(skipsFile, { force: true }));

  it('outside CI: skip, recorded with the test file and the reason', async () => {
    let installed = false;
    const result = await requireSystem('unobtainium', { hint: 'not sold here', probe: async () => false, install: async () => void (installed = true), ci: false, skipsFile });
    expect(result).toEqual({ available: false, reason: expect.stringContaining('not sold here') });
    expect(installed).toBe(false);
    const entry = JSON.parse(readFileSync(skipsFile, 'utf8').trim());
    expect(entry).toMatchObject({ dependency: 'unobtainium', file: 'packages/testkit/test/testkit.test.ts' });
  });

  it('under CI: install, probe again, and fail loudly when still missing', async () => {
    let installs = 0;
    let present = false;
    const ok = await requireSystem('fixable', { hint: 'h', probe: async () => present, install: async () => void (installs++, (present = true)), ci: true, skipsFile });
    expect(ok.available).toBe(true);
    expect(installs).toBe(1);
    await expect(requireSystem('broken', { hint: 'h', probe: async () => false, install: async () => undefined, ci: true, skipsFile })).rejects.toThrow(/could not be made available under CI/);
  });
});
