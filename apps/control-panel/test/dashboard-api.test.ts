import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '@tether/testkit';
import { FleetFeed, type StreamClient } from '../src/dashboard/fleet-feed.js';
import type { FleetRow } from '../src/dashboard/fleet-rows.js';
import { generateToken, hashToken } from '../src/domain/tokens.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// The fleet page's server side without a browser: cookie sign-in and its
// limits, revocation, security headers, the stream's pace and bound, and
// missed ACKs counted from ACK-timeout session events across a restart.

const REFRESH_MS = 200;

interface SseEvent {
  event: string;
  data: unknown;
  at: number;
}

/** Opens the stream with a cookie and collects its events until stopped. */
function openStream(url: string, cookie: string) {
  const events: SseEvent[] = [];
  const controller = new AbortController();
  let ended = false;
  const done = (async () => {
    const res = await fetch(`${url}/dashboard/api/stream`, { headers: { cookie }, signal: controller.signal });
    if (res.status !== 200) throw new Error(`stream answered ${res.status}`);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end) break;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event = /^event: (.+)$/m.exec(block)?.[1];
        const data = /^data: (.+)$/m.exec(block)?.[1];
        if (event && data) events.push({ event, data: JSON.parse(data), at: Date.now() });
      }
    }
    ended = true;
  })().catch(() => {
    ended = true;
  });
  return { events, stop: () => controller.abort(), done, ended: () => ended };
}

describe('fleet page API', () => {
  let panel: Panel;
  const agents: RawAgent[] = [];

  async function signIn(token: string, origin = panel.url) {
    return fetch(`${panel.url}/dashboard/api/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin },
      body: JSON.stringify({ token }),
    });
  }
  async function cookieFor(token: string): Promise<string> {
    const res = await signIn(token);
    expect(res.status).toBe(200);
    return res.headers.get('set-cookie')!.split(';')[0]!;
  }
  async function operator(): Promise<{ token: string; id: string }> {
    const token = generateToken('operator');
    const row = await panel.prisma.apiToken.create({ data: { name: `op-${Date.now()}`, role: 'operator', tokenHash: hashToken(token) } });
    return { token, id: row.id };
  }

  beforeAll(async () => {
    panel = await startPanel({ env: { TETHER_FLEET_REFRESH_MS: String(REFRESH_MS), TETHER_ACK_TIMEOUT_MS: '300', TETHER_HEARTBEAT_INTERVAL_MS: '50' } });
  }, 60_000);

  afterAll(async () => {
    for (const a of agents) a.close();
    await panel?.close();
  });

  it('sets a host-only, HttpOnly, SameSite=Strict cookie with an expiry that holds no token', async () => {
    const res = await signIn(panel.operatorToken);
    const header = res.headers.get('set-cookie')!;
    expect(header).toMatch(/^tether_dashboard=v2\.[^;]+; Path=\/; Max-Age=43200; HttpOnly; SameSite=Strict$/);
    expect(header).not.toContain('Domain');
    expect(header).not.toContain(panel.operatorToken);
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
  });

  it('refuses node tokens, unknown tokens, and sign-in from another origin', async () => {
    const node = await panel.createNode('api-node-token');
    expect((await signIn(node.token)).status).toBe(403);
    expect((await signIn(generateToken('operator'))).status).toBe(401);
    const foreign = await signIn(panel.operatorToken, 'http://evil.example');
    expect(foreign.status).toBe(403);
    expect(foreign.headers.get('set-cookie')).toBeNull();
    const noOrigin = await fetch(`${panel.url}/dashboard/api/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: panel.operatorToken }),
    });
    expect(noOrigin.status).toBe(403);
  });

  it('a forged or tampered cookie is not signed in; /v1 never takes the cookie', async () => {
    const cookie = await cookieFor(panel.operatorToken);
    const me = async (c: string) => (await (await fetch(`${panel.url}/dashboard/api/me`, { headers: { cookie: c } })).json()) as { signedIn: boolean };
    expect((await me(cookie)).signedIn).toBe(true);
    expect((await me(cookie.slice(0, -2) + (cookie.endsWith('AA') ? 'BB' : 'AA'))).signedIn).toBe(false);
    expect((await fetch(`${panel.url}/dashboard/api/stream`, { headers: { cookie: 'tether_dashboard=v1.x.9999999999.abc' } })).status).toBe(401);
    expect((await fetch(`${panel.url}/v1/sessions`, { headers: { cookie } })).status).toBe(401);
  });

  it('revoking the token ends its cookie sessions, open streams included, within a refresh', async () => {
    const op = await operator();
    const cookie = await cookieFor(op.token);
    const stream = openStream(panel.url, cookie);
    await waitFor(() => stream.events.find((e) => e.event === 'snapshot'), { timeoutMs: 3_000 });
    const revokedAt = Date.now();
    await panel.prisma.apiToken.update({ where: { id: op.id }, data: { revokedAt: new Date() } });
    await waitFor(() => stream.events.find((e) => e.event === 'signed-out'), { timeoutMs: REFRESH_MS + 3_000 });
    // One refresh of the token list plus one batch.
    expect(Date.now() - revokedAt).toBeLessThanOrEqual(REFRESH_MS + 1_000 + 500);
    await stream.done;
    expect(stream.ended()).toBe(true);
    const me = (await (await fetch(`${panel.url}/dashboard/api/me`, { headers: { cookie } })).json()) as { signedIn: boolean };
    expect(me.signedIn).toBe(false);
  });

  it('pushes at most one batch a second, with only what changed', async () => {
    const node = await panel.createNode('api-busy');
    const cookie = await cookieFor(panel.operatorToken);
    const stream = openStream(panel.url, cookie);
    await waitFor(() => stream.events.find((e) => e.event === 'snapshot'), { timeoutMs: 3_000 });
    // Heartbeats every 20 ms: 150 frames in 3 s, each moving the node's last-frame time.
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, heartbeatMs: 20 });
    agents.push(agent);
    await new Promise((r) => setTimeout(r, 3_500));
    stream.stop();
    const batches = stream.events.filter((e) => e.event === 'changes');
    expect(batches.length).toBeGreaterThanOrEqual(2);
    expect(batches.length).toBeLessThanOrEqual(4);
    for (let i = 1; i < batches.length; i++) expect(batches[i]!.at - batches[i - 1]!.at).toBeGreaterThanOrEqual(900);
    // After the row became reachable, later batches carry only its moving last-frame time.
    const last = batches.at(-1)!.data as { rows: FleetRow[]; frames: Record<string, number> };
    expect(last.rows).toEqual([]);
    expect(Object.keys(last.frames)).toContain((await panel.prisma.node.findUniqueOrThrow({ where: { name: 'api-busy' } })).id);
  });

  it('rows carry cordoned and labels from the database, a change within a refresh', async () => {
    const node = await panel.createNode('api-labelled');
    const cookie = await cookieFor(panel.operatorToken);
    const stream = openStream(panel.url, cookie);
    // The newest row of the node in what the stream sent (a node made just now joins at the next directory read).
    const rowOf = () =>
      stream.events
        .filter((e) => e.event === 'snapshot' || e.event === 'changes')
        .flatMap((e) => (e.data as { rows: FleetRow[] }).rows.filter((r) => r.id === node.id))
        .at(-1);
    expect(await waitFor(rowOf, { timeoutMs: 5_000 })).toMatchObject({ cordoned: false, labels: {} });
    expect((await panel.api('PATCH', `/v1/nodes/${node.id}`, { labels: { zone: 'a' } })).status).toBe(200);
    expect((await panel.api('POST', `/v1/nodes/${node.id}/cordon`)).status).toBe(200);
    const changedAt = Date.now();
    const change = await waitFor(
      () => stream.events.find((e) => e.event === 'changes' && (e.data as { rows: FleetRow[] }).rows.some((r) => r.id === node.id && r.cordoned === true)),
      { timeoutMs: 5_000 },
    );
    stream.stop();
    expect(rowOf()!.labels).toEqual({ zone: 'a' });
    // A directory refresh, then the next batch (at most a second apart).
    expect(change.at - changedAt).toBeLessThanOrEqual(REFRESH_MS + 1_000 + 500);
  });

  it('counts missed ACKs of the last 24 h from ACK-timeout session events, across a panel restart', async () => {
    const node = await panel.createNode('api-acks');
    // Never ACKs the routing map: the session is killed after the ACK timeout (300 ms).
    const mute = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, ack: ['workloads'], heartbeatMs: 50 });
    agents.push(mute);
    await mute.waitClosed(3_000);
    expect(mute.closed!.code).toBe(4001);
    const cookie = await cookieFor(panel.operatorToken);
    const detail = async () =>
      (await (await fetch(`${panel.url}/dashboard/api/nodes/${node.id}`, { headers: { cookie } })).json()) as { row: FleetRow };
    const before = await waitFor(async () => {
      const d = await detail();
      return d.row.missedAcks24h === 1 ? d : null;
    }, { timeoutMs: 3_000 });
    expect(before.row).toMatchObject({ state: 'unreachable', reason: 'ACK timeout' });
    // An old event is outside the window.
    await panel.prisma.sessionEvent.create({ data: { nodeId: node.id, sessionId: 'ses_old', kind: 'closed', closeCode: 4001, reason: 'old', at: new Date(Date.now() - 25 * 3_600_000) } });
    await panel.stopApp();
    await panel.restartApp();
    const cookie2 = await cookieFor(panel.operatorToken);
    const after = await waitFor(async () => {
      const res = await fetch(`${panel.url}/dashboard/api/nodes/${node.id}`, { headers: { cookie: cookie2 } });
      const d = (await res.json()) as { row: FleetRow };
      return d.row ? d : null;
    }, { timeoutMs: 3_000 });
    expect(after.row).toMatchObject({ missedAcks24h: 1, state: 'unreachable', reason: 'ACK timeout' });
    // Read from the database after the restart: the times are the rows' own, to the millisecond.
    const stored = await panel.prisma.node.findUniqueOrThrow({ where: { id: node.id } });
    expect(stored.unreachableSince).not.toBeNull();
    expect(after.row.since).toBe(stored.unreachableSince!.getTime());
    expect(after.row.lastFrameAt).toBe(stored.lastSeenAt!.getTime());
    // The REST session health says the same (its per-session counter died with the session).
    const rest = await panel.api('GET', '/v1/sessions');
    expect(rest.body.sessions.find((r: { nodeName: string }) => r.nodeName === 'api-acks')).toMatchObject({ missedAcks: 0, missedAcks24h: 1 });
  });
});

describe('fleet feed bound', () => {
  const row = (id: string, lastFrameAt: number): FleetRow => ({
    id, name: id, state: 'reachable', since: null, reason: null, reasonDetail: null, sessionId: 's', connectedSince: 1, lastFrameAt,
    heartbeatMs: 5000, missedAcks24h: 0, services: { running: 0, desired: 0 }, runtime: null, reloadsToday: 0, lastReloadReason: null,
    routing: { desiredHash: null, appliedHash: null, drifting: false },
  });

  it('drops a client whose unsent bytes pass the bound, keeps the others, and sends one serialised batch to all', async () => {
    let t = 1;
    const dropped: string[] = [];
    const feed = new FleetFeed({ rows: () => [row('a', t)], maxBufferedBytes: 1_000, onDrop: (r) => dropped.push(r), batchMs: 60_000 });
    const make = (buffered: () => number) => {
      const chunks: string[] = [];
      const ends: string[] = [];
      const client: StreamClient = { write: (c) => void chunks.push(c), get buffered() { return buffered(); }, allowed: () => true, end: (r) => void ends.push(r) };
      return { client, chunks, ends };
    };
    let slowBuffer = 0;
    const fast = make(() => 0);
    const slow = make(() => slowBuffer);
    feed.add(fast.client);
    feed.add(slow.client);
    t = 2;
    feed.tick();
    expect(fast.chunks).toHaveLength(2);
    expect(slow.chunks[1]).toBe(fast.chunks[1]);
    slowBuffer = 1_001;
    t = 3;
    feed.tick();
    expect(slow.ends).toEqual(['slow_client']);
    expect(dropped).toEqual(['slow_client']);
    expect(fast.chunks).toHaveLength(3);
    expect(feed.size).toBe(1);
    await feed.stop();
  });
});
