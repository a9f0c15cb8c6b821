import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPostgres, waitFor, type TestPostgres } from '@tether/testkit';
import { loadConfig } from '../src/config.js';
import { generateToken, hashToken } from '../src/domain/tokens.js';
import { INTERNAL_HEADER } from '../src/log-streams/log-proxy.js';
import { startPanel, type RunningPanel } from '../src/server.js';
import { RawAgent } from './helpers/raw-agent.js';

// TETHER_INTERNAL_LISTEN (issue 25): two panels started as main.ts starts
// them, on one PostgreSQL, each with its internal surface on a listener of its
// own (port 0). /internal/v1 answers only there (the public listener 404s it,
// as a path that does not exist), the internal listener serves nothing else,
// each panel advertises its internal listener (not its public address) in its
// lease row, and a read on A of a node whose session B holds asks B over it.
// A third panel without the setting serves /internal/v1 publicly, as before.

const TOKEN = 'tth_op_internal-listener-test-token';
let pg: TestPostgres;
const panels: RunningPanel[] = [];
const dirs: string[] = [];
let a: RunningPanel;
let b: RunningPanel;
let plain: RunningPanel;
let agent: RawAgent | undefined;

async function start(id: string, databaseUrl: string, internal: boolean): Promise<RunningPanel> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tether-internal-listen-'));
  dirs.push(dataDir);
  const panel = await startPanel(
    loadConfig({
      DATABASE_URL: databaseUrl,
      TETHER_PORT: '0',
      TETHER_LOG_LEVEL: 'silent',
      TETHER_DATA_DIR: dataDir,
      TETHER_ADMIN_TOKEN: TOKEN,
      TETHER_PANEL_ID: id,
      TETHER_PANEL_LEASE_MS: '1500',
      TETHER_FLEET_REFRESH_MS: '200',
      ...(internal ? { TETHER_INTERNAL_LISTEN: '127.0.0.1:0' } : {}),
    }),
  );
  panels.push(panel);
  return panel;
}

beforeAll(async () => {
  pg = await startTestPostgres();
  a = await start('panel-a', pg.url, true);
  b = await start('panel-b', pg.url, true);
  plain = await start('panel-plain', pg.url, false);
}, 120_000);
afterAll(async () => {
  await agent?.close();
  for (const p of panels.reverse()) await p.close();
  await pg?.stop();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const internalUrlOf = async (panel: RunningPanel, id: string) =>
  (await panel.db.prisma.panel.findUniqueOrThrow({ where: { id }, select: { internalUrl: true } })).internalUrl;

async function get(url: string, token?: string) {
  const res = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  const text = await res.text();
  return { status: res.status, code: text ? (JSON.parse(text) as { error?: { code?: string } }).error?.code : undefined, internal: res.headers.get(INTERNAL_HEADER) };
}

describe('TETHER_INTERNAL_LISTEN', () => {
  it('serves /internal/v1 only on the internal listener, which serves nothing else; each panel advertises that listener', async () => {
    for (const [panel, id] of [[a, 'panel-a'], [b, 'panel-b']] as const) {
      const internal = await waitFor(async () => (await internalUrlOf(a, id)) ?? undefined, { timeoutMs: 5_000 });
      expect(internal).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(internal).not.toBe(panel.url);
      const port = Number(new URL(internal).port);
      expect(port).toBe((panel.app.internalListener!.server.address() as { port: number }).port);
      // The public listener: the internal route is a path that does not exist (no internal marker), the API is there.
      expect(await get(`${panel.url}/internal/v1/services/x/logs`)).toMatchObject({ status: 404, code: 'NOT_FOUND', internal: null });
      expect((await get(`${panel.url}/v1/sessions`, TOKEN)).status).toBe(200);
      // The internal listener: the internal surface (it wants a panel's credential, a token is refused), and nothing else.
      expect(await get(`${internal}/internal/v1/services/x/logs`, TOKEN)).toMatchObject({ status: 401, code: 'UNAUTHORIZED', internal: '1' });
      expect(await get(`${internal}/v1/sessions`, TOKEN)).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await get(`${internal}/healthz`)).toMatchObject({ status: 404 });
    }
    // Without the setting, as before: the internal surface on the public listener, advertised there.
    expect(plain.app.internalListener).toBeUndefined();
    expect(await get(`${plain.url}/internal/v1/services/x/logs`, TOKEN)).toMatchObject({ status: 401, internal: '1' });
    expect(await waitFor(async () => (await internalUrlOf(a, 'panel-plain')) ?? undefined, { timeoutMs: 5_000 })).toBe(plain.url);
  }, 30_000);

  it('a read on A of a node whose session B holds asks B over its internal listener (source: owner)', async () => {
    const token = generateToken('node');
    const node = await a.db.prisma.node.create({ data: { name: 'internal-listen-node', tokenHash: hashToken(token) } });
    agent = await RawAgent.connect({ url: b.url, token, node: node.name, heartbeatMs: 300 });
    type Row = { nodeId: string; state: string; panelId: string | null; source: string | null };
    const rowOn = async (panel: RunningPanel) => {
      const res = await fetch(`${panel.url}/v1/sessions`, { headers: { authorization: `Bearer ${TOKEN}` } });
      return ((await res.json()) as { sessions: Row[] }).sessions.find((r) => r.nodeId === node.id);
    };
    // The first request between two panels is slow (connections opened, code compiled once): wait for the owner's answer.
    const row = await waitFor(async () => {
      const r = await rowOn(a);
      return r?.source === 'owner' ? r : undefined;
    }, { timeoutMs: 8_000 });
    expect(row).toMatchObject({ state: 'connected', panelId: 'panel-b', source: 'owner' });
    expect(await rowOn(b)).toMatchObject({ state: 'connected', source: 'session' });
  }, 30_000);
});
