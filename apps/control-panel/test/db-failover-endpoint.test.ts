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
    const teamsOnOld = async () => Number((await pair.primary.query<{ n: string }>('SELECT count(*) AS n FROM teams', 'tether'))[0]!.n);
    const before = await teamsOnOld();
    endpoint.retarget(pair.primary.port);
    await pair.standby.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'tether' AND pid <> pg_backend_pid()");
    // A request on a connection the termination ended is 503 DATABASE_UNAVAILABLE (the panel cannot tell yet);
    // the next connection reaches the old primary and is refused as such. Never a 201 from here on.
    const codes: string[] = [];
    await waitFor(async () => {
      const res = await createTeam();
      codes.push(res.status === 503 ? res.body.error.code : String(res.status));
      return codes.at(-1) === 'DATABASE_NOT_PRIMARY' || !['DATABASE_UNAVAILABLE'].includes(codes.at(-1)!);
    }, { timeoutMs: 10_000 });
    expect(codes.at(-1), codes.join(', ')).toBe('DATABASE_NOT_PRIMARY');
    expect(panel.app.panelStatus.database.staleRefused).toBeGreaterThan(0);
    for (let i = 0; i < 5; i++) expect((await createTeam()).body.error.code).toBe('DATABASE_NOT_PRIMARY');
    // Nothing this panel tried reached the old primary's tables.
    expect(await teamsOnOld()).toBe(before);
    expect((await fetch(`${panel.url}/readyz`)).status).toBe(503);
    const metrics = await (await fetch(`${panel.url}/metrics`)).text();
    expect(metrics).toMatch(/^tether_db_stale_primary_refused_total [1-9]\d*$/m);
  }, 60_000);
});
