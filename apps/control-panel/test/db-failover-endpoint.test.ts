import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgresPair, startTcpRelay, waitFor, type PostgresPair, type TcpRelay } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// One endpoint that moves (issue 39): DATABASE_URL names a single address, a
// TCP relay standing in for a proxy or a cloud service's endpoint. The primary
// is SIGKILLed, the standby promoted and the endpoint moved to it: the panel
// writes again. Then the endpoint is moved back to the old primary, restarted
// writable on its old timeline: the panel refuses it (503
// DATABASE_NOT_PRIMARY, counted) rather than write to it.

let pair: PostgresPair;
let endpoint: TcpRelay;
let panel: Panel;

beforeAll(async () => {
  pair = await startPostgresPair();
  await pair.createDatabase('tether');
  endpoint = await startTcpRelay(pair.primary.port);
  panel = await startPanel({
    databaseUrl: endpoint.via(pair.primary.url('tether')),
    env: { TETHER_DB_CONNECT_TIMEOUT_MS: '1000', TETHER_DB_QUERY_TIMEOUT_MS: '1000', TETHER_READY_TIMEOUT_MS: '400' },
  });
}, 90_000);

afterAll(async () => {
  await panel?.close();
  await endpoint?.close();
  await pair?.stop();
}, 60_000);

const createTeam = () => panel.api('POST', '/v1/teams', { name: `t-${Date.now()}-${Math.round(Math.random() * 1e6)}` });

describe('one endpoint moved by the operator', () => {
  it('follows the endpoint to the promoted standby, then refuses the old primary behind it', async () => {
    expect((await createTeam()).status).toBe(201);
    await pair.primary.kill();
    await pair.standby.promote();
    endpoint.retarget(pair.standby.port);
    const promotedAt = performance.now();
    await waitFor(async () => (await createTeam()).status === 201, { timeoutMs: 10_000 });
    expect(performance.now() - promotedAt).toBeLessThan(2_000);
    expect(panel.app.panelStatus.database.timeline).toBe(2);

    // The old primary back, writable, and the endpoint pointed at it: every connection ends and reconnects there.
    await pair.primary.restart();
    endpoint.retarget(pair.primary.port);
    await pair.standby.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'tether' AND pid <> pg_backend_pid()");
    let refused: Awaited<ReturnType<typeof createTeam>> | undefined;
    await waitFor(async () => {
      refused = await createTeam();
      return refused.status === 503;
    }, { timeoutMs: 10_000 });
    expect(refused!.body.error.code).toBe('DATABASE_NOT_PRIMARY');
    expect(panel.app.panelStatus.database.staleRefused).toBeGreaterThan(0);
    // Nothing this panel tried reached the old primary's tables.
    const before = Number((await pair.primary.query<{ n: string }>('SELECT count(*) AS n FROM teams', 'tether'))[0]!.n);
    for (let i = 0; i < 5; i++) expect((await createTeam()).status).toBe(503);
    expect(Number((await pair.primary.query<{ n: string }>('SELECT count(*) AS n FROM teams', 'tether'))[0]!.n)).toBe(before);
    expect((await fetch(`${panel.url}/readyz`)).status).toBe(503);
    const metrics = await (await fetch(`${panel.url}/metrics`)).text();
    expect(metrics).toMatch(/^tether_db_stale_primary_refused_total [1-9]\d*$/m);
  }, 60_000);
});
