import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startFaultablePostgres, waitFor, type FaultablePostgres } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// Token expiry (issue 24) and the audit trail while the database is down: an
// expired token is refused like a revoked one, also from the cache the panel
// answers from in an outage; a refusal made during the outage reaches the
// trail through the session-fact outbox once the database is back.

const EXPIRES_IN_MS = 2_500;

describe('token expiry and refusals across a database outage', () => {
  let pg: FaultablePostgres;
  let panel: Panel;

  beforeAll(async () => {
    pg = await startFaultablePostgres();
    panel = await startPanel({ databaseUrl: pg.url, env: { TETHER_DB_CONNECT_TIMEOUT_MS: '500', TETHER_DB_QUERY_TIMEOUT_MS: '500', TETHER_OUTBOX_RETRY_MAX_MS: '300' } });
  }, 60_000);
  afterAll(async () => {
    await pg.start().catch(() => undefined);
    await panel?.close();
    await pg?.destroy();
  });

  it('refuses an expired token, from the cache too, and records refusals made in the outage', async () => {
    const team = await panel.api('POST', '/v1/teams', { name: 'expiring' });
    expect((await panel.api('POST', `/v1/teams/${team.body.id}/tokens`, { name: 'past', expiresAt: new Date(Date.now() - 1000).toISOString() })).body.error.code).toBe('VALIDATION_FAILED');
    const expiresAt = new Date(Date.now() + EXPIRES_IN_MS);
    const short = await panel.api('POST', `/v1/teams/${team.body.id}/tokens`, { name: 'short', expiresAt: expiresAt.toISOString() });
    expect(short.body.expiresAt).toBe(expiresAt.toISOString());
    const lasting = await panel.api('POST', `/v1/teams/${team.body.id}/tokens`, { name: 'lasting' });
    expect(lasting.body.expiresAt).toBeNull();
    // Both used once: the panel remembers them.
    expect((await panel.api('GET', '/v1/services', undefined, short.body.token)).status).toBe(200);
    expect((await panel.api('GET', '/v1/services', undefined, lasting.body.token)).status).toBe(200);
    await panel.settled();

    await pg.stop();
    // Before its expiry, from the cache: the token passes, the operator endpoint refuses it (no database needed).
    expect((await panel.api('POST', '/v1/nodes', { name: 'nope' }, short.body.token)).status).toBe(403);
    await sleep(Math.max(0, expiresAt.getTime() - Date.now()) + 100);
    // After it: refused as unknown, not 503; the other token still passes from the cache.
    const expired = await panel.api('POST', '/v1/nodes', { name: 'nope' }, short.body.token);
    expect(expired.status).toBe(401);
    expect(expired.body.error.code).toBe('UNAUTHORIZED');
    expect((await panel.api('POST', '/v1/nodes', { name: 'nope' }, lasting.body.token)).status).toBe(403);
    await pg.start();

    // The two refusals of the outage are in the trail (the expired token's 401 names no actor: none) once the outbox wrote them.
    const refused = await waitFor(
      async () => {
        const res = await panel.api('GET', '/v1/audit?outcome=refused');
        return res.status === 200 && res.body.items.length >= 3 ? res.body.items : undefined;
      },
      { timeoutMs: 10_000, message: 'refusals written after the outage' },
    );
    expect(refused.map((i: { actor: { tokenId: string }; action: string; code: string }) => [i.actor.tokenId, i.action, i.code])).toEqual([
      [lasting.body.id, 'node.create', 'FORBIDDEN'],
      [short.body.id, 'node.create', 'FORBIDDEN'],
      // Before the outage: the operator's token with an expiry in the past.
      [expect.any(String), 'token.create', 'VALIDATION_FAILED'],
    ]);
    // Back on the database: still refused.
    expect((await panel.api('GET', '/v1/services', undefined, short.body.token)).status).toBe(401);
  }, 60_000);
});
