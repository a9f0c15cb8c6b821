import { describe, expect, it } from 'vitest';
import { CAPABILITIES } from '@tether/protocol';
import { sleep, waitFor } from '@tether/testkit';
import { generateToken, hashToken } from '../src/domain/tokens.js';
import { usePanels, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';
import { openTextStream, startHeldRequest, type TextStream } from './helpers/text-stream.js';

// Revoking a token ends everything it holds within 1 s on every panel (issue
// 25): log follows (local and through another panel), deployment event
// streams, ?wait= waits, fleet-page streams. The revoking panel ends its own
// at once; the others on the `revoked` NOTIFY signal. On the main this test
// was written against, a follow and an event stream opened with the token were
// still open 5 s after DELETE /v1/tokens/:id, and a fleet-page stream lasted
// until the 5 s token refresh. Bound both ways: everything is still open just
// before the revocation (after 1.5 s open), and has ended within 1 s after it.

const { panels: [a, b], cleanup } = usePanels(['a', 'b'], {
  TETHER_PANEL_LEASE_MS: '2000',
  TETHER_FLEET_REFRESH_MS: '60000',
  TETHER_DASHBOARD_SECRET: 'revocation-test-secret-of-at-least-32-chars',
}) as {
  panels: [Panel, Panel];
  cleanup: (() => unknown)[];
  databaseUrl: () => string;
};

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

async function operatorToken(panel: Panel): Promise<{ id: string; token: string }> {
  const token = generateToken('operator');
  const row = await panel.prisma.apiToken.create({ data: { name: `op-${Math.random()}`, role: 'operator', tokenHash: hashToken(token) } });
  return { id: row.id, token };
}

async function signIn(panel: Panel, token: string): Promise<string> {
  const res = await fetch(`${panel.url}/dashboard/api/sign-in`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: panel.url },
    body: JSON.stringify({ token }),
  });
  expect(res.status).toBe(200);
  return res.headers.get('set-cookie')!.split(';')[0]!;
}

describe('revoking a token', () => {
  it('ends its log follows, event streams and waits on both panels within 1 s, not before', async () => {
    const node = await a.createNode('revoke-node');
    const service = await a.createService(node.id);
    const agent = await RawAgent.connect({ url: a.url, token: node.token, node: node.name, capabilities: [CAPABILITIES.LOGS] });
    cleanup.push(() => agent.close());
    const made = await a.api('POST', `/v1/teams/${service.teamId}/tokens`, { name: 'to-revoke' });
    expect(made.status).toBe(201);
    const customer: string = made.body.token;
    // A deployment the agent ACKs but never finishes: it stays `delivered`, not final.
    const deployed = await a.api('POST', `/v1/services/${service.id}/deployments`, undefined, customer);
    expect(deployed.status).toBe(202);
    const depId: string = deployed.body.id;

    const streams: Record<string, TextStream> = {};
    for (const [name, panel] of [['A', a], ['B', b]] as const) {
      streams[`logs ${name}`] = await openTextStream(`${panel.url}/v1/services/${service.id}/logs?follow=1`, { headers: auth(customer) });
      streams[`events ${name}`] = await openTextStream(`${panel.url}/v1/deployments/${depId}/events`, { headers: auth(customer) });
      streams[`wait ${name}`] = startHeldRequest(`${panel.url}/v1/services/${service.id}/deployments?wait=60`, { method: 'POST', headers: auth(customer) });
    }
    // ?wait= answers only at its end: its status is known then. The others are 200 streams now.
    for (const [name, s] of Object.entries(streams)) if (!name.startsWith('wait')) expect(s.status, name).toBe(200);
    await waitFor(() => a.app.panelStatus.heldStreams() === 3 && b.app.panelStatus.heldStreams() === 3);
    await sleep(1_500);
    for (const [name, s] of Object.entries(streams)) expect(s.endedAt, `${name} ended before the revocation`).toBeNull();

    const revokedAt = performance.now();
    const tokenId = (await a.prisma.apiToken.findUniqueOrThrow({ where: { tokenHash: hashToken(customer) } })).id;
    expect((await a.api('DELETE', `/v1/tokens/${tokenId}`)).status).toBe(200);
    const ended = await Promise.all(Object.entries(streams).map(async ([name, s]) => [name, (await s.ended) - revokedAt] as const));
    for (const [name, ms] of ended) expect(ms, `${name} ended ${Math.round(ms)} ms after the revocation`).toBeLessThan(1_000);
    expect(streams['logs A']!.text).toContain('"code":"TOKEN_REVOKED"');
    expect(streams['logs B']!.text).toContain('"code":"TOKEN_REVOKED"');
    expect(streams['events A']!.text).toContain('"code":"UNAUTHORIZED"');
    expect(streams['events B']!.text).toContain('"code":"UNAUTHORIZED"');
    expect(streams['wait A']!.status).toBe(401);
    expect(streams['wait B']!.status).toBe(401);
    expect(a.app.panelStatus.heldStreams() + b.app.panelStatus.heldStreams()).toBe(0);
  }, 30_000);

  it('ends fleet-page streams signed in with it on the other panel within 1 s, not at the next refresh', async () => {
    const op = await operatorToken(a);
    // The token refresh is a minute here: only the signal can end the stream in time.
    const cookie = await signIn(b, op.token);
    const stream = await openTextStream(`${b.url}/dashboard/api/stream`, { headers: { cookie } });
    expect(stream.status).toBe(200);
    await sleep(1_500);
    expect(stream.endedAt).toBeNull();
    const revokedAt = performance.now();
    expect((await a.api('DELETE', `/v1/tokens/${op.id}`)).status).toBe(200);
    expect((await stream.ended) - revokedAt).toBeLessThan(1_000);
    expect(stream.text).toContain('event: signed-out');
  }, 20_000);

  it("signing out ends that cookie on every panel (its stream within 1 s), not its token's other cookies", async () => {
    const op = await operatorToken(a);
    const me = async (panel: Panel, cookie: string) => ((await (await fetch(`${panel.url}/dashboard/api/me`, { headers: { cookie } })).json()) as { signedIn: boolean }).signedIn;
    const cookie = await signIn(a, op.token);
    // Signed in on B as well, so B's token list (refreshed each minute here) knows the token; the cookie is A's.
    const other = await signIn(b, op.token);
    await waitFor(async () => (await me(b, cookie)) === true);
    const stream = await openTextStream(`${b.url}/dashboard/api/stream`, { headers: { cookie } });
    await sleep(1_500);
    expect(stream.endedAt).toBeNull();
    expect([await me(a, cookie), await me(b, cookie)]).toEqual([true, true]);
    const signedOutAt = performance.now();
    const res = await fetch(`${a.url}/dashboard/api/sign-out`, { method: 'POST', headers: { cookie, origin: a.url } });
    expect(res.status).toBe(204);
    expect((await stream.ended) - signedOutAt).toBeLessThan(1_000);
    // The old value is refused everywhere (on the main this was written against, it opened the page until its 12 h expiry).
    expect([await me(a, cookie), await me(b, cookie)]).toEqual([false, false]);
    expect((await fetch(`${b.url}/dashboard/api/stream`, { headers: { cookie } })).status).toBe(401);
    // Recorded for panels that did not hear the signal (a restart, a LISTEN reconnect), and only that cookie.
    expect(await a.prisma.dashboardSignOut.count()).toBe(1);
    expect([await me(a, other), await me(b, other)]).toEqual([true, true]);
  }, 20_000);
});
