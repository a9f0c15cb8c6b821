import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFaultablePostgres, type FaultablePostgres } from '@tether/testkit';
import { loadConfig } from '../src/config.js';
import { generateToken, hashToken } from '../src/domain/tokens.js';
import { startPanel, type RunningPanel } from '../src/server.js';

// The database bounds follow their settings on the panel as main.ts starts it
// (issue 25: on the main this test was written against, with both bounds at
// 1,200 ms and PostgreSQL frozen, GET /v1/nodes, GET /v1/services and
// POST /v1/teams answered 503 only after 10.0 s, the defaults' sum, because
// startPanel opened the pool with the default limits). Both ways: not before
// the query bound (the request did wait for the database), not long after it.

const BOUND_MS = 1_200;
const SLACK_MS = 800;
const TOKEN = 'tth_op_db-bounds-test-operator-token';
let pg: FaultablePostgres;
let panel: RunningPanel;
let dataDir: string;

beforeAll(async () => {
  pg = await startFaultablePostgres();
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'tether-db-bounds-'));
  const config = loadConfig({
    DATABASE_URL: pg.url,
    TETHER_PORT: '0',
    TETHER_LOG_LEVEL: 'silent',
    TETHER_DATA_DIR: dataDir,
    TETHER_ADMIN_TOKEN: TOKEN,
    TETHER_DB_CONNECT_TIMEOUT_MS: String(BOUND_MS),
    TETHER_DB_QUERY_TIMEOUT_MS: String(BOUND_MS),
  });
  panel = await startPanel(config);
}, 60_000);
afterEach(() => pg.thaw());
afterAll(async () => {
  pg?.thaw();
  await panel?.close();
  await pg?.destroy();
  await rm(dataDir, { recursive: true, force: true });
});

async function timed(method: string, p: string, body?: unknown, token = TOKEN) {
  const started = performance.now();
  const res = await fetch(`${panel.url}${p}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  const code = text ? (JSON.parse(text) as { error?: { code?: string } }).error?.code : undefined;
  return { status: res.status, code, fromMemory: res.headers.get('x-tether-from-memory'), ms: performance.now() - started };
}

describe('database bounds on a frozen PostgreSQL', () => {
  it(`GET /v1/nodes, GET /v1/services, POST /v1/teams answer 503 DATABASE_UNAVAILABLE within the ${BOUND_MS} ms bounds, not 10 s`, async () => {
    // Verified once while the database answers (the token is then remembered for the outage).
    expect((await timed('GET', '/v1/nodes')).status).toBe(200);
    pg.freeze();
    for (const [method, p, body] of [
      ['GET', '/v1/nodes', undefined],
      ['GET', '/v1/services', undefined],
      ['POST', '/v1/teams', { name: `frozen-${Date.now()}` }],
    ] as const) {
      // Each after a second without a failure: the token check waits its bound again (not answered from the "just failed" memory).
      await new Promise((r) => setTimeout(r, 1_100));
      const answer = await timed(method, p, body);
      expect(answer, `${method} ${p}`).toMatchObject({ status: 503, code: 'DATABASE_UNAVAILABLE' });
      expect(answer.ms, `${method} ${p}`).toBeGreaterThanOrEqual(BOUND_MS - 100);
      expect(answer.ms, `${method} ${p}`).toBeLessThan(2 * BOUND_MS + SLACK_MS);
    }
  }, 30_000);
});

describe('memory reads during a database outage', () => {
  // GET /v1/sessions answers from memory (the connected map, the last node list). On the main this was written
  // against, its token check waited the full bound again whenever the last fault was more than a second old.
  it('GET /v1/sessions waits the bound once, then answers from memory at once however long the outage lasts; a token never verified still waits and gets 503; a revocation is seen once the database is back', async () => {
    const other = generateToken('operator');
    await panel.db.prisma.apiToken.create({ data: { name: 'db-bounds second operator', role: 'operator', tokenHash: hashToken(other) } });
    for (const t of [TOKEN, other]) expect((await timed('GET', '/v1/sessions', undefined, t)).status).toBe(200);
    pg.freeze();
    // The first read finds out: its token check waits the bound, then answers from the token cache.
    const first = await timed('GET', '/v1/sessions');
    expect(first).toMatchObject({ status: 200 });
    expect(first.ms).toBeGreaterThanOrEqual(BOUND_MS - 100);
    expect(first.ms).toBeLessThan(BOUND_MS + SLACK_MS);
    // Then, known down: every read answers from memory without waiting, also past the one-second window.
    const slow: number[] = [];
    const until = performance.now() + 4_000;
    let reads = 0;
    while (performance.now() < until) {
      for (const t of [TOKEN, other]) {
        const answer = await timed('GET', '/v1/sessions', undefined, t);
        expect(answer.status).toBe(200);
        expect(answer.fromMemory).not.toBeNull();
        if (answer.ms >= 150) slow.push(Math.round(answer.ms));
        reads++;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(reads).toBeGreaterThanOrEqual(20);
    expect(slow).toEqual([]);
    // The other way: a token the database never verified here is not honoured from memory; it waits for the database.
    const stranger = await timed('GET', '/v1/sessions', undefined, generateToken('operator'));
    expect(stranger).toMatchObject({ status: 503, code: 'DATABASE_UNAVAILABLE' });
    expect(stranger.ms).toBeGreaterThanOrEqual(BOUND_MS - 100);
    expect(stranger.ms).toBeLessThan(2 * BOUND_MS + SLACK_MS);
    // Thawed: a token revoked in the database is refused within a window and a read (the background check sees it).
    pg.thaw();
    await panel.db.prisma.apiToken.update({ where: { tokenHash: hashToken(other) }, data: { revokedAt: new Date() } });
    const thawed = performance.now();
    let status = 200;
    while (status === 200 && performance.now() - thawed < 5_000) {
      status = (await timed('GET', '/v1/sessions', undefined, other)).status;
      if (status === 200) await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe(401);
    expect(performance.now() - thawed).toBeLessThan(2_500);
    expect((await timed('GET', '/v1/sessions')).fromMemory).toBeNull();
  }, 40_000);
});
