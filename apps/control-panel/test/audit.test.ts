import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqlOf } from '../src/db/database.js';
import { pruneAudit } from '../src/domain/audit-query.js';
import { generateKey } from '../src/secrets/keyring.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// Issue 24's audit trail against a real panel and PostgreSQL: one success row
// per change made here with the right actor, none for a change the database
// rolled back, a refused row per refused action (through the outbox), the
// fleet page's sign-in and sign-out, request ids and the trusted proxy's
// client address, the customer's view, paging and retention.

interface Item {
  id: string;
  actor: { tokenId: string | null; name: string | null; kind: string | null };
  teamId: string | null;
  action: string;
  target: { type: string; id: string | null };
  outcome: string;
  code: string | null;
  requestId: string | null;
  sourceAddress: string | null;
}

describe('audit trail', () => {
  let panel: Panel;
  let operatorId: string;

  beforeAll(async () => {
    panel = await startPanel({ env: { TETHER_SECRETS_KEY: generateKey(), TETHER_TRUSTED_PROXIES: '127.0.0.1' } });
    operatorId = (await panel.prisma.apiToken.findFirstOrThrow({ where: { role: 'operator' } })).id;
  });
  afterAll(async () => {
    await panel?.close();
  });

  async function all(token = panel.operatorToken, query = ''): Promise<Item[]> {
    await panel.settled();
    const items: Item[] = [];
    let cursor: string | null = null;
    do {
      const res = await panel.api('GET', `/v1/audit?limit=3${query}${cursor ? `&cursor=${cursor}` : ''}`, undefined, token);
      expect(res.status).toBe(200);
      expect(res.body.items.length).toBeLessThanOrEqual(3);
      items.push(...res.body.items);
      cursor = res.body.nextCursor;
    } while (cursor);
    return items.reverse();
  }

  it('records each change once with its actor, refusals apart, and nothing a rollback undid', async () => {
    const expected: { action: string; actor: string; outcome: string; code?: string }[] = [];
    const op = (action: string) => expected.push({ action, actor: operatorId, outcome: 'success' });

    const team = await panel.api('POST', '/v1/teams', { name: 'audited' });
    op('team.create');
    const token = await panel.api('POST', `/v1/teams/${team.body.id}/tokens`, { name: 'ci bot' });
    op('token.create');
    const customer = token.body.token as string;
    const customerId = token.body.id as string;
    const node = await panel.api('POST', '/v1/nodes', { name: 'audited-node' });
    op('node.create');
    const svc = await panel.api('POST', '/v1/services', { teamId: team.body.id, name: 'web', image: 'busybox:1', node: 'audited-node', secrets: { A: 'x' } });
    op('service.create');
    op('secret.set');
    await panel.api('PATCH', `/v1/services/${svc.body.id}`, { env: { E: '1' }, secrets: { A: null, B: 'y' } });
    op('service.update');
    op('secret.remove');
    op('secret.set');
    // A route to a service without a port: inserted, then rolled back (SERVICE_HAS_NO_PORT): no success row, one refused.
    const noPort = await panel.api('POST', '/v1/routes', { domain: 'a.example.com', serviceId: svc.body.id });
    expect(noPort.body.error.code).toBe('SERVICE_HAS_NO_PORT');
    expected.push({ action: 'route.create', actor: operatorId, outcome: 'refused', code: 'SERVICE_HAS_NO_PORT' });
    await panel.api('PATCH', `/v1/services/${svc.body.id}`, { internalPort: 8080 });
    op('service.update');
    const route = await panel.api('POST', '/v1/routes', { domain: 'a.example.com', serviceId: svc.body.id });
    expect(route.status).toBe(201);
    op('route.create');
    // No agent: the deployment is recorded and ends unreachable; that is its outcome, not a refusal.
    const dep = await panel.api('POST', `/v1/services/${svc.body.id}/deployments`, {});
    expect(dep.body.error.code).toBe('NODE_UNREACHABLE');
    op('deployment.create');
    // A duplicate name: the insert fails, nothing is recorded as done.
    expect((await panel.api('POST', '/v1/teams', { name: 'audited' })).status).toBe(409);
    expected.push({ action: 'team.create', actor: operatorId, outcome: 'refused', code: 'CONFLICT' });

    // The customer: its own service (success), an operator action (refused).
    const own = await panel.api('POST', '/v1/services', { name: 'mine', image: 'busybox:1', node: 'audited-node' }, customer);
    expect(own.status).toBe(201);
    expected.push({ action: 'service.create', actor: customerId, outcome: 'success' });
    expect((await panel.api('POST', '/v1/nodes', { name: 'not-mine' }, customer)).status).toBe(403);
    expected.push({ action: 'node.create', actor: customerId, outcome: 'refused', code: 'FORBIDDEN' });

    await panel.api('DELETE', `/v1/routes/${route.body.id}`);
    op('route.delete');
    await panel.api('DELETE', `/v1/services/${svc.body.id}`);
    op('service.delete');
    await panel.api('DELETE', `/v1/nodes/${node.body.id}`);
    op('node.decommission');
    // The fleet page.
    const signIn = await fetch(`${panel.url}/dashboard/api/sign-in`, { method: 'POST', headers: { 'content-type': 'application/json', origin: panel.url }, body: JSON.stringify({ token: panel.operatorToken }) });
    expect(signIn.status).toBe(200);
    op('session.sign-in');
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    expect((await fetch(`${panel.url}/dashboard/api/sign-out`, { method: 'POST', headers: { cookie, origin: panel.url } })).status).toBe(204);
    op('session.sign-out');
    await panel.api('DELETE', `/v1/tokens/${customerId}`);
    op('token.revoke');
    // A revoked token is refused before any route: it names no actor, so no row.
    expect((await panel.api('POST', '/v1/services', { name: 'late', image: 'busybox:1' }, customer)).status).toBe(401);

    const items = await all();
    expect(items.map((i) => ({ action: i.action, actor: i.actor.tokenId, outcome: i.outcome, ...(i.code ? { code: i.code } : {}) }))).toEqual(expected);
    const ids = new Set(items.map((i) => i.requestId));
    expect(ids.size).toBeGreaterThan(expected.length - 4);
    expect(items.find((i) => i.action === 'service.create' && i.actor.tokenId === customerId)).toMatchObject({ actor: { name: 'ci bot', kind: 'customer' }, teamId: team.body.id });
    expect(items.find((i) => i.action === 'secret.remove')).toMatchObject({ target: { type: 'secret', id: `${svc.body.id}/A` }, teamId: team.body.id });
    expect(items[0]).toMatchObject({ actor: { name: 'test operator', kind: 'operator' }, target: { type: 'team', id: team.body.id }, sourceAddress: '127.0.0.1' });

    // Filters.
    expect((await all(panel.operatorToken, '&outcome=refused')).map((i) => i.code)).toEqual(['SERVICE_HAS_NO_PORT', 'CONFLICT', 'FORBIDDEN']);
    expect((await all(panel.operatorToken, `&actor=${customerId}`)).map((i) => i.action)).toEqual(['service.create', 'node.create']);
    expect((await all(panel.operatorToken, '&action=secret.set')).length).toBe(2);
    expect((await all(panel.operatorToken, `&targetType=service&targetId=${svc.body.id}`)).map((i) => i.action)).toEqual(['service.create', 'service.update', 'service.update', 'service.delete']);
    const future = new Date(Date.now() + 60_000).toISOString();
    expect(await all(panel.operatorToken, `&from=${future}`)).toEqual([]);
    expect((await panel.api('GET', '/v1/audit?cursor=bm9wZQ')).body.error.code).toBe('VALIDATION_FAILED');
  });

  it('gives each answer a request id and takes the client address from a trusted proxy', async () => {
    const res = await fetch(`${panel.url}/v1/teams`, {
      method: 'POST',
      headers: { authorization: `Bearer ${panel.operatorToken}`, 'content-type': 'application/json', 'x-forwarded-for': '203.0.113.7' },
      body: JSON.stringify({ name: 'behind-proxy' }),
    });
    expect(res.status).toBe(201);
    const requestId = res.headers.get('x-request-id');
    expect(requestId).toMatch(/^req_[A-Za-z0-9_-]{16}$/);
    const [row] = await all(panel.operatorToken, '&action=team.create&outcome=success').then((items) => items.slice(-1));
    expect(row).toMatchObject({ requestId, sourceAddress: '203.0.113.7' });
  });

  it('shows a customer its team only, and deletes rows past the retention', async () => {
    const team = await panel.api('POST', '/v1/teams', { name: 'viewer' });
    const token = (await panel.api('POST', `/v1/teams/${team.body.id}/tokens`, { name: 'viewer' })).body.token as string;
    const items = await all(token);
    expect(items.map((i) => i.action)).toEqual(['team.create', 'token.create']);
    expect(items.every((i) => i.teamId === team.body.id)).toBe(true);

    const before = (await all()).length;
    await sqlOf(panel.prisma).run(`UPDATE audit_events SET at = now() - interval '3 days' WHERE team_id = $1`, [team.body.id]);
    expect(await pruneAudit(panel.prisma, 2)).toBe(2);
    expect(await pruneAudit(panel.prisma, 0)).toBe(0);
    expect((await all()).length).toBe(before - 2);
  });
});
