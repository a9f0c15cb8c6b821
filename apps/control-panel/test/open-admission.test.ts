import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { waitFor } from '@tether/testkit';
import { RawAgent } from './helpers/raw-agent.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// Upgrades opening at once are bounded: past TETHER_MAX_OPENING_SESSIONS a new upgrade is answered 503 with
// Retry-After before its token is checked, and one that is welcomed (or goes away) frees its place.

let panel: Panel;
beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_MAX_OPENING_SESSIONS: '1', TETHER_RESTART_OPENS_PER_SEC: '1' } });
});
afterAll(async () => {
  await panel?.close();
});

/** An upgrade that completes and then says nothing (no hello): it holds its place until the hello timeout. */
function upgrade(token: string): Promise<{ socket?: WebSocket; status?: number; retryAfter?: string }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${panel.url.replace(/^http/, 'ws')}/v1/agent/connect`, { headers: { authorization: `Bearer ${token}` } });
    socket.once('open', () => resolve({ socket }));
    socket.once('unexpected-response', (_req, res) => {
      res.resume();
      resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'] as string });
      socket.terminate();
    });
    socket.once('error', reject);
  });
}

describe('upgrades opening at once', () => {
  it('past the bound get 503 + Retry-After (even with a bad token: refused before the check); a welcome frees the place', async () => {
    const [a, b, c] = await Promise.all(['adm-a', 'adm-b', 'adm-c'].map((n) => panel.createNode(n)));
    const silent = await upgrade(a!.token);
    expect(silent.socket).toBeDefined();
    const refused = await upgrade('tth_node_not_a_real_token_at_all_000000');
    // One opening (1 session / 1 a second → 1 s window) and not a 401: no work was done for it.
    expect(refused).toEqual({ status: 503, retryAfter: '1' });
    const metrics = await (await fetch(`${panel.url}/metrics`)).text();
    expect(metrics).toMatch(/^tether_agent_upgrades_refused_busy_total 1$/m);
    silent.socket!.close();
    // Places free again once the silent one is gone: a whole hello → welcome goes through, and then another.
    const first = await waitFor(() => RawAgent.connect({ url: panel.url, token: b!.token, node: b!.name, heartbeatMs: 1_000 }).catch(() => undefined), { timeoutMs: 3_000 });
    const second = await RawAgent.connect({ url: panel.url, token: c!.token, node: c!.name, heartbeatMs: 1_000 });
    expect(first.welcome.sessionId).toBeTruthy();
    expect(second.welcome.sessionId).toBeTruthy();
    first.close();
    second.close();
  });
});
