import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLOSE_CODES, DECOMMISSIONED_REFUSAL_CODE, FRAME_ERROR_CODES, MAX_FRAME_BYTES, PROTOCOL_VERSION } from '@tether/protocol';
import { waitFor } from '@tether/testkit';
import WebSocket from 'ws';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// The first incident, as a regression test: a session that goes completely
// silent while holding its socket open is torn down within the deadline, and
// the node then reads unreachable with its services unknown.

const IDLE_MS = 400;
let panel: Panel;

beforeAll(async () => {
  panel = await startPanel({
    env: { TETHER_SESSION_IDLE_MS: String(IDLE_MS), TETHER_PING_INTERVAL_MS: '100', TETHER_HELLO_TIMEOUT_MS: '300', TETHER_LAST_SEEN_FLUSH_MS: '100' },
  });
});
afterAll(async () => panel?.close());

describe('read-idle deadline', () => {
  it('tears down a silent session no earlier than the deadline and no later than deadline + 1 s', async () => {
    const node = await panel.createNode('silent-1');
    const service = await panel.createService(node.id);
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 50 });
    await waitFor(() => panel.app.agentSide.registry.get(node.id));
    let status = await panel.api('GET', `/v1/services/${service.id}/status`);
    expect(status.body.evidence.sessionId).toBe(agent.welcome.sessionId);

    agent.goSilent();
    await waitFor(() => !panel.app.agentSide.registry.get(node.id), { timeoutMs: IDLE_MS + 3_000, intervalMs: 5 });
    // Measured from the last frame the agent sent: the panel read it no earlier, so the deadline is exact from there.
    const tornDownAfter = performance.now() - agent.lastSentAt;
    expect(tornDownAfter).toBeGreaterThanOrEqual(IDLE_MS);
    expect(tornDownAfter).toBeLessThanOrEqual(IDLE_MS + 1_000);

    const closed = await agent.waitClosed();
    expect(closed.code).toBe(CLOSE_CODES.IDLE_TIMEOUT);

    status = await panel.api('GET', `/v1/services/${service.id}/status`);
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({ state: 'unknown', runningReplicas: null, evidence: null });
    expect(status.body.reason).toMatch(/^node silent-1 unreachable since \d{4}-.*no frame for \d+ ms/);

    const sessions = await panel.api('GET', '/v1/sessions');
    const row = sessions.body.sessions.find((r: { nodeId: string }) => r.nodeId === node.id);
    expect(row).toMatchObject({ state: 'unreachable', sessionId: null, lastTeardown: { code: CLOSE_CODES.IDLE_TIMEOUT } });
    await panel.settled();
    const history = await panel.prisma.sessionEvent.findMany({ where: { nodeId: node.id }, orderBy: { id: 'asc' } });
    expect(history.map((e) => [e.kind, e.closeCode])).toEqual([
      ['opened', null],
      ['closed', CLOSE_CODES.IDLE_TIMEOUT],
    ]);
    const row2 = await panel.prisma.node.findUniqueOrThrow({ where: { id: node.id } });
    expect(row2.unreachableSince).not.toBeNull();
  });

  it('keeps a session that only heartbeats (any valid frame resets the deadline)', async () => {
    const node = await panel.createNode('chatty-1');
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 100, pong: false });
    await new Promise((r) => setTimeout(r, IDLE_MS * 3));
    expect(panel.app.agentSide.registry.get(node.id)?.id).toBe(agent.welcome.sessionId);
    expect(agent.closed).toBeNull();
    agent.close();
  });

  it('pings every session at the configured interval', async () => {
    const node = await panel.createNode('pinged-1');
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 100 });
    await agent.waitFor((m) => m.type === 'ping', 1_500);
    await waitFor(() => (panel.app.agentSide.registry.get(node.id)?.pongs ?? 0) >= 2, { timeoutMs: 2_000 });
    agent.close();
  });
});

describe('authentication before the upgrade', () => {
  async function upgrade(token: string | null): Promise<number> {
    return (await refusal(token)).status;
  }

  /** The refused upgrade's status and its body's error code. */
  async function refusal(token: string | null): Promise<{ status: number; code: string | undefined }> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(`ws://127.0.0.1:${panel.port}/v1/agent/connect`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
      socket.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, code: (JSON.parse(body || '{}') as { error?: { code?: string } }).error?.code });
          socket.terminate();
        });
      });
      socket.on('open', () => {
        socket.terminate();
        reject(new Error('upgrade completed'));
      });
      socket.on('error', () => undefined);
    });
  }

  it('never gives a socket to a missing, unknown or decommissioned token', async () => {
    expect(await upgrade(null)).toBe(401);
    expect(await upgrade('tth_node_nope')).toBe(401);
    const node = await panel.createNode('retired-1');
    await panel.prisma.node.update({ where: { id: node.id }, data: { decommissioned: true } });
    // The code an agent acts on (it stops everything it runs for Tether).
    expect(await refusal(node.token)).toEqual({ status: 403, code: DECOMMISSIONED_REFUSAL_CODE });
  });

  it('checks a warm node token without a query, and forgets it when the node is decommissioned', async () => {
    const queries = () => panel.app.panelStatus.nodeTokenQueries;
    const node = await panel.createNode('warm-1');
    const cold = queries();
    (await RawAgent.connect({ url: panel.url, token: node.token })).close();
    expect(queries()).toBe(cold + 1);
    for (let i = 0; i < 3; i++) (await RawAgent.connect({ url: panel.url, token: node.token })).close();
    expect(queries()).toBe(cold + 1);
    expect((await panel.api('DELETE', `/v1/nodes/${node.id}`)).status).toBe(200);
    expect(await upgrade(node.token)).toBe(403);
    expect(queries()).toBe(cold + 2);
  });
});

describe('supersede', () => {
  it('a newer session of the same node closes the older one, never the other way round', async () => {
    const node = await panel.createNode('twice-1');
    const first = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 100 });
    const second = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 100 });
    const closed = await first.waitClosed();
    expect(closed.code).toBe(CLOSE_CODES.SUPERSEDED);
    expect(panel.app.agentSide.registry.get(node.id)?.id).toBe(second.welcome.sessionId);
    // The node never read unreachable in between.
    await panel.settled();
    const row = await panel.prisma.node.findUniqueOrThrow({ where: { id: node.id } });
    expect(row.unreachableSince).toBeNull();
    await new Promise((r) => setTimeout(r, 300));
    expect(second.closed).toBeNull();
    second.close();
  });
});

describe('handshake', () => {
  it('closes a socket that sends no hello within the hello timeout', async () => {
    const node = await panel.createNode('mute-1');
    const socket = new WebSocket(`ws://127.0.0.1:${panel.port}/v1/agent/connect`, { headers: { authorization: `Bearer ${node.token}` } });
    const opened = Date.now();
    const code = await new Promise<number>((resolve) => socket.on('close', (c) => resolve(c)));
    expect(code).toBe(CLOSE_CODES.HELLO_TIMEOUT);
    expect(Date.now() - opened).toBeGreaterThanOrEqual(250);
    expect(panel.app.agentSide.registry.get(node.id)).toBeUndefined();
  });

  it('refuses a first frame that is not hello, and a hello of another protocol version', async () => {
    const node = await panel.createNode('rude-1');
    const socket = new WebSocket(`ws://127.0.0.1:${panel.port}/v1/agent/connect`, { headers: { authorization: `Bearer ${node.token}` } });
    const frames: { code?: string }[] = [];
    socket.on('message', (d) => frames.push(JSON.parse(d.toString())));
    await new Promise((r) => socket.once('open', r));
    socket.send(JSON.stringify({ type: 'heartbeat', id: 'x1', seq: 0, containers: [], runtime: { available: true, error: null }, routing: { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null } }));
    const code = await new Promise<number>((resolve) => socket.on('close', (c) => resolve(c)));
    expect(code).toBe(CLOSE_CODES.PROTOCOL_ERROR);
    expect(frames[0]).toMatchObject({ type: 'error', code: FRAME_ERROR_CODES.UNEXPECTED_MESSAGE, ref: 'x1' });

    const other = new WebSocket(`ws://127.0.0.1:${panel.port}/v1/agent/connect`, { headers: { authorization: `Bearer ${node.token}` } });
    const otherFrames: { code?: string }[] = [];
    other.on('message', (d) => otherFrames.push(JSON.parse(d.toString())));
    await new Promise((r) => other.once('open', r));
    const hello = { type: 'hello', id: 'h1', node: 'rude-1', agentVersion: 'x', protocolVersion: PROTOCOL_VERSION + 1, containers: [], runtime: { available: true, error: null }, routing: { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null } };
    other.send(JSON.stringify(hello));
    expect(await new Promise<number>((resolve) => other.on('close', (c) => resolve(c)))).toBe(CLOSE_CODES.UNSUPPORTED_PROTOCOL_VERSION);
    expect(otherFrames[0]).toMatchObject({ type: 'error', code: FRAME_ERROR_CODES.UNSUPPORTED_PROTOCOL_VERSION });
  });
});

describe('bad frames from an authenticated agent', () => {
  it('get coded error replies, a run of them a protocol-error close, and every other session keeps being served', async () => {
    const bystanderNode = await panel.createNode('bystander-1');
    const bystander = await RawAgent.connect({ url: panel.url, token: bystanderNode.token, heartbeatMs: 50 });
    const node = await panel.createNode('noisy-1');
    const noisy = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 0 });

    const cases: [string | Buffer, boolean, string][] = [
      ['{not json', false, FRAME_ERROR_CODES.INVALID_JSON],
      ['{"type":"hullo","id":"b2"}', false, FRAME_ERROR_CODES.UNKNOWN_TYPE],
      ['{"type":"heartbeat","id":"b3"}', false, FRAME_ERROR_CODES.MISSING_FIELD],
      [Buffer.from('{"type":"pong","id":"b4","ref":"x"}'), true, FRAME_ERROR_CODES.BINARY_FRAME],
    ];
    for (const [data, binary, code] of cases) {
      const before = noisy.received.length;
      noisy.sendRaw(data, binary);
      const reply = await noisy.waitFor((m) => noisy.received.indexOf(m) >= before && m.type === 'error');
      expect(reply).toMatchObject({ type: 'error', code });
      noisy.heartbeat(); // a valid frame ends the streak
    }
    // Oversized: rejected by code, not by a crash.
    const before = noisy.received.length;
    noisy.sendRaw(JSON.stringify({ type: 'pong', id: 'big', ref: 'x', pad: 'a'.repeat(MAX_FRAME_BYTES) }));
    expect(await noisy.waitFor((m) => noisy.received.indexOf(m) >= before && m.type === 'error')).toMatchObject({ code: FRAME_ERROR_CODES.FRAME_TOO_LARGE });
    // A panel-only message from an agent.
    noisy.send({ type: 'ping', id: 'p-from-agent' });
    await noisy.waitFor((m) => m.type === 'error' && (m as { ref: string | null }).ref === 'p-from-agent');
    expect(panel.app.agentSide.registry.get(node.id)).toBeDefined();

    for (let i = 0; i < 5; i++) noisy.sendRaw('garbage');
    expect((await noisy.waitClosed()).code).toBe(CLOSE_CODES.PROTOCOL_ERROR);

    const heartbeatsBefore = panel.app.agentSide.registry.get(bystanderNode.id)!.heartbeats;
    await waitFor(() => panel.app.agentSide.registry.get(bystanderNode.id)!.heartbeats > heartbeatsBefore + 3);
    expect(bystander.closed).toBeNull();
    expect((await panel.api('GET', '/healthz')).status).toBe(200);
    bystander.close();
  });
});
