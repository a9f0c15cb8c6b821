import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { startPanel, type RunningPanel } from '../src/server.js';

// What `npm start` does, twice on one data directory: the panel runs its own
// embedded PostgreSQL (no DATABASE_URL), prints a generated operator token on
// the first start only, and everything made through the API is still there
// after a restart.

let dataDir: string;
const running: RunningPanel[] = [];

beforeAll(async () => {
  // Under the OS temp dir: as root, embedded PostgreSQL runs as `postgres`, which must reach it.
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'tether-restart-'));
});

afterAll(async () => {
  for (const panel of running) await panel.close().catch(() => undefined);
  await rm(dataDir, { recursive: true, force: true });
});

async function start(env: Record<string, string> = {}) {
  const printed: string[] = [];
  const warnings: { msg: string; nodes?: number; backlog?: number }[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line)) });
  const config = loadConfig({ TETHER_DATA_DIR: dataDir, TETHER_PORT: '0', TETHER_LOG_LEVEL: 'silent', ...env });
  const panel = await startPanel(config, { print: (text) => printed.push(text), logger });
  running.push(panel);
  const api = async (method: string, p: string, token: string, body?: unknown) => {
    const res = await fetch(panel.url + p, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: (await res.json()) as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  };
  return { panel, printed, warnings, api };
}

describe('panel restart on the embedded database', () => {
  let token = '';
  let serviceId = '';

  it('first start: embedded PostgreSQL, migrations applied, an operator token generated and printed once', async () => {
    const { panel, printed, api } = await start();
    expect(panel.db.embedded).toBeDefined();
    expect(panel.db.migrations.applied.length).toBeGreaterThan(0);
    expect(panel.adminToken.kind).toBe('generated');
    const banner = printed.find((t) => t.includes('operator token'));
    token = banner?.match(/tth_op_[A-Za-z0-9_-]{43}/)?.[0] ?? '';
    expect(token).not.toBe('');
    expect(printed.join('\n').match(/tth_op_/g)).toHaveLength(1);
    expect(printed.join('\n')).toContain(`listening on ${panel.url}`);

    const docs = await fetch(`${panel.url}/docs/`);
    expect(docs.status).toBe(200);
    expect(((await (await fetch(`${panel.url}/openapi.json`)).json()) as { openapi: string }).openapi).toBe('3.1.0');

    const team = await api('POST', '/v1/teams', token, { name: 'survivors' });
    expect(team.status).toBe(201);
    expect((await api('POST', '/v1/nodes', token, { name: 'host-1' })).status).toBe(201);
    const service = await api('POST', '/v1/services', token, { name: 'web', image: 'nginx', teamId: team.body.id });
    expect(service.status).toBe(201);
    serviceId = service.body.id;
    await panel.close();
  });

  it('second start on the same data directory: no new token, nothing re-applied, data and token still there', async () => {
    expect(token).not.toBe('');
    const { panel, printed, api } = await start();
    expect(panel.adminToken.kind).toBe('existing');
    expect(printed.join('\n')).not.toContain('tth_op_');
    expect(panel.db.migrations.applied).toEqual([]);
    const service = await api('GET', `/v1/services/${serviceId}`, token);
    expect(service.status).toBe(200);
    expect(service.body).toMatchObject({ name: 'web', nodeName: 'host-1' });
    expect((await api('GET', '/v1/teams', token)).body.map((t: { name: string }) => t.name)).toEqual(['survivors']);
    await panel.close();
  });

  it('with TETHER_ADMIN_TOKEN set, that token is valid and nothing is printed', async () => {
    const mine = 'operator-chosen-token-123456';
    const { panel, printed, api } = await start({ TETHER_ADMIN_TOKEN: mine });
    expect(panel.adminToken.kind).toBe('configured');
    expect(printed.join('\n')).not.toContain(mine);
    expect((await api('GET', '/v1/teams', mine)).status).toBe(200);
    // The generated one keeps working too: it was never revoked.
    expect((await api('GET', '/v1/teams', token)).status).toBe(200);
    await panel.close();
  });

  it('warns at start when the registered nodes outnumber the accept queue (TETHER_LISTEN_BACKLOG, net.core.somaxconn), and only then', async () => {
    const first = await start({ TETHER_LISTEN_BACKLOG: '2' });
    expect(first.warnings.filter((w) => /accept queue/.test(w.msg))).toEqual([]);
    expect((await first.api('POST', '/v1/nodes', token, { name: 'host-2' })).status).toBe(201);
    expect((await first.api('POST', '/v1/nodes', token, { name: 'host-3' })).status).toBe(201);
    await first.panel.close();
    const short = await start({ TETHER_LISTEN_BACKLOG: '2' });
    expect(short.warnings.filter((w) => /accept queue/.test(w.msg))).toEqual([
      expect.objectContaining({ nodes: 3, backlog: 2, msg: expect.stringContaining('3 nodes are registered but the accept queue holds 2 (TETHER_LISTEN_BACKLOG 2)') }),
    ]);
    await short.panel.close();
    const deep = await start();
    expect(deep.warnings.filter((w) => /accept queue/.test(w.msg))).toEqual([]);
    await deep.panel.close();
  });
});
