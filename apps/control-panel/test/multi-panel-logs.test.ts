import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CAPABILITIES, type LogLine, type LogsCredit, type LogsOpen } from '@tether/protocol';
import { sleep, spawnProcess, waitFor } from '@tether/testkit';
import { readLogs } from './helpers/log-reader.js';
import { usePanels, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// Log streams between panels: a customer asks panel A for the logs of a
// service whose node's session panel B holds; A passes B's stream on, with the
// same lines, the same refusals, and B's credit model intact (a customer who
// stops reading stops the agent); an owner that dies mid-stream ends it with
// OWNER_PANEL_LOST; an owner without an internal URL is a coded 503.

const LEASE_MS = 1_500;
const WINDOW = 65_536;
const PANEL_MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');
const env = {
  TETHER_PANEL_LEASE_MS: String(LEASE_MS),
  TETHER_LOG_WINDOW_BYTES: String(WINDOW),
  TETHER_LOG_STREAM_BYTES_PER_SEC: String(64 * 1024 * 1024),
  TETHER_LOG_STREAMS_PER_NODE: '2',
};

const { panels: [a, b], cleanup, databaseUrl } = usePanels(['a', 'b'], env) as { panels: [Panel, Panel]; cleanup: (() => unknown)[]; databaseUrl: () => string };

const line = (text: string, i: number): LogLine => ({ containerId: 'c0ffee', replica: 'tether-web-0', stream: 'stdout', time: `2026-12-01T05:00:00.${String(i).padStart(9, '0')}Z`, text });
const logsUrl = (panel: { url: string }, serviceId: string, query = '') => `${panel.url}/v1/services/${serviceId}/logs${query}`;

async function nodeOn(owner: { url: string }, name: string, capabilities: string[] = [CAPABILITIES.LOGS]) {
  const node = await a.createNode(name);
  const service = await a.createService(node.id);
  const agent = await RawAgent.connect({ url: owner.url, token: node.token, node: name, capabilities });
  cleanup.push(() => agent.close());
  return { node, service, agent };
}

/** The agent's side of one stream: a few lines, then its end. */
async function serveOne(agent: RawAgent, seen: Set<string>) {
  const open = await agent.waitFor<LogsOpen>((m) => m.type === 'logs.open' && !seen.has(m.streamId));
  seen.add(open.streamId);
  agent.send({ type: 'logs.chunk', id: `c-${open.streamId}`, streamId: open.streamId, lines: [line('first', 1), line('second \u001b[1m', 2), line('ünïcode ✓', 3)] });
  agent.send({ type: 'logs.end', id: `e-${open.streamId}`, streamId: open.streamId, code: 'END_OF_LOGS', reason: 'no more lines' });
  return open;
}

describe('log streams through a panel that does not hold the session', () => {
  it('the same lines through A as through B, the same query reaching the agent', async () => {
    const { service, agent } = await nodeOn(b, 'logs-proxy-lines');
    const seen = new Set<string>();
    const query = '?tail=3&since=2026-12-01T04:00:00Z&follow=1';
    const direct = await readLogs(logsUrl(b, service.id, query), b.operatorToken);
    const openB = await serveOne(agent, seen);
    const viaA = await readLogs(logsUrl(a, service.id, query), a.operatorToken);
    const openA = await serveOne(agent, seen);
    expect([direct.status, viaA.status]).toEqual([200, 200]);
    const [endB, endA] = await Promise.all([direct.done, viaA.done]);
    expect(endA).toEqual(endB);
    expect(endA).toEqual({ type: 'end', code: 'END_OF_LOGS', reason: 'no more lines' });
    expect(viaA.records).toEqual(direct.records);
    expect(viaA.logs().map((r) => r.text)).toEqual(['first', 'second \\u001b[1m', 'ünïcode ✓']);
    const { id: _a, streamId: _sa, ...askedOfB } = openB;
    const { id: _b, streamId: _sb, ...askedThroughA } = openA;
    expect(askedThroughA).toEqual(askedOfB);
  });

  it('a customer leaving A ends the stream on B: the agent is told logs.close, and B holds no stream', async () => {
    const { node, agent, service } = await nodeOn(b, 'logs-proxy-leave');
    const reader = await readLogs(logsUrl(a, service.id, '?follow=1'), a.operatorToken);
    const open = await agent.waitFor<LogsOpen>((m) => m.type === 'logs.open');
    agent.send({ type: 'logs.chunk', id: 'l-1', streamId: open.streamId, lines: [line('one', 1)] });
    await waitFor(() => reader.logs().length === 1);
    reader.close();
    await agent.waitFor((m) => m.type === 'logs.close' && m.streamId === open.streamId, 3_000);
    expect(b.app.agentSide.logs.openOn(node.id)).toBe(0);
  });

  it('the same refusals: 501 for an agent without logs, 429 at the owner\'s per-node cap, 404 and 400 as locally', async () => {
    const old = await nodeOn(b, 'logs-proxy-old', []);
    const get = async (panel: Panel, url: string) => {
      const res = await fetch(url, { headers: { authorization: `Bearer ${panel.operatorToken}` } });
      return { status: res.status, body: (await res.json()) as { error: { code: string; message: string } } };
    };
    const onB = await get(b, logsUrl(b, old.service.id));
    expect(onB.status).toBe(501);
    expect(await get(a, logsUrl(a, old.service.id))).toEqual(onB);

    const busy = await nodeOn(b, 'logs-proxy-cap');
    const held = await Promise.all([readLogs(logsUrl(b, busy.service.id, '?follow=1'), b.operatorToken), readLogs(logsUrl(a, busy.service.id, '?follow=1'), a.operatorToken)]);
    cleanup.push(() => held.forEach((r) => r.close()));
    const capB = await get(b, logsUrl(b, busy.service.id));
    expect(capB.status).toBe(429);
    expect(capB.body.error.code).toBe('LOG_STREAMS_EXHAUSTED');
    expect(await get(a, logsUrl(a, busy.service.id))).toEqual(capB);

    expect((await get(a, logsUrl(a, 'svc_nope'))).status).toBe(404);
    const bad = await get(a, logsUrl(a, busy.service.id, '?since=yesterday'));
    expect(bad).toEqual(await get(b, logsUrl(b, busy.service.id, '?since=yesterday')));
    expect(bad.status).toBe(400);
  });

  it('a customer who stops reading on A stops the agent\'s credit on B; reading again resumes it; no line lost', async () => {
    const { service, agent } = await nodeOn(b, 'logs-proxy-slow');
    const reader = await readLogs(logsUrl(a, service.id, '?follow=1'), a.operatorToken);
    const open = await agent.waitFor<LogsOpen>((m) => m.type === 'logs.open');
    const granted = () => open.credit + agent.received.filter((m): m is LogsCredit => m.type === 'logs.credit' && m.streamId === open.streamId).reduce((n, m) => n + m.bytes, 0);
    let sent = 0;
    let count = 0;
    // The agent sends whenever it holds credit: chunks of about 50 KiB.
    const pump = setInterval(() => {
      for (;;) {
        const lines = Array.from({ length: 50 }, (_, i) => line(`${count + i} ${'z'.repeat(1_000)}`, (count + i) % 1e9));
        const message = { type: 'logs.chunk' as const, id: `s-${count}`, streamId: open.streamId, lines };
        const bytes = Buffer.byteLength(JSON.stringify(message));
        if (sent + bytes > granted()) return;
        agent.send(message);
        sent += bytes;
        count += lines.length;
      }
    }, 5);
    cleanup.push(() => clearInterval(pump));
    reader.pause();
    // Credit stops once the socket buffers between the agent's panel, A and the customer are full.
    let before = -1;
    await waitFor(async () => {
      const now = granted();
      const still = now === before;
      before = now;
      if (!still) await sleep(1_000);
      return still;
    }, { timeoutMs: 30_000, intervalMs: 0 });
    const plateau = granted();
    await sleep(1_000);
    expect(granted()).toBe(plateau);
    // Bounded: the owner's window plus what the kernel's socket buffers may hold on the two hops (B → A, A → customer),
    // each a receive and a send buffer at the kernel's maximum, plus one chunk and a stream buffer per process.
    const maxOf = async (f: string) => Number((await readFile(f, 'utf8')).trim().split(/\s+/)[2]);
    const kernel = 2 * ((await maxOf('/proc/sys/net/ipv4/tcp_rmem')) + (await maxOf('/proc/sys/net/ipv4/tcp_wmem')));
    expect(plateau).toBeLessThan(WINDOW + kernel + 2 * 1024 * 1024);
    console.log(`credit granted while the customer on A did not read: ${plateau} bytes (window ${WINDOW}, kernel socket buffers at most ${kernel})`);
    reader.resume();
    await waitFor(() => granted() > plateau + 4 * WINDOW, { timeoutMs: 10_000 });
    clearInterval(pump);
    agent.send({ type: 'logs.end', id: 'slow-end', streamId: open.streamId, code: 'END_OF_LOGS', reason: 'done' });
    expect(await reader.done).toMatchObject({ code: 'END_OF_LOGS' });
    const texts = reader.logs().map((r) => Number(r.text!.split(' ')[0]));
    expect(texts).toEqual(Array.from({ length: count }, (_, i) => i));
  }, 60_000);
});

describe('log streams when the owner cannot serve them', () => {
  /** A panel process on the shared database; its URL, and the process. */
  async function panelProcess(id: string, extra: Record<string, string> = {}) {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tether-mpl-'));
    cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
    const child = spawnProcess(process.execPath, [PANEL_MAIN], {
      env: { ...env, DATABASE_URL: databaseUrl(), TETHER_DATA_DIR: dataDir, TETHER_PORT: '0', TETHER_LOG_LEVEL: 'warn', TETHER_PANEL_ID: id, TETHER_ADMIN_TOKEN: 'multi-panel-logs-operator-token', ...extra },
    });
    cleanup.push(() => child.stop(1_000));
    const [, url] = await child.waitForOutput(/listening on (http:\/\/\S+)/, 30_000);
    return { child, url: url!.replace('0.0.0.0', '127.0.0.1') };
  }

  it('an owner killed mid-stream: the stream through A ends with OWNER_PANEL_LOST', async () => {
    const k = await panelProcess('panel-k');
    await waitFor(async () => (await a.prisma.panel.findUnique({ where: { id: 'panel-k' } }))?.internalUrl !== null, { timeoutMs: 5_000 });
    const { service, agent } = await nodeOn(k, 'logs-proxy-killed');
    const reader = await readLogs(logsUrl(a, service.id, '?follow=1'), a.operatorToken);
    expect(reader.status).toBe(200);
    const open = await agent.waitFor<LogsOpen>((m) => m.type === 'logs.open');
    agent.send({ type: 'logs.chunk', id: 'k-1', streamId: open.streamId, lines: [line('before the kill', 1)] });
    await waitFor(() => reader.logs().length === 1);
    k.child.child.kill('SIGKILL');
    const end = await reader.done;
    expect(end).toMatchObject({ type: 'end', code: 'OWNER_PANEL_LOST', reason: expect.stringContaining('panel-k') });
  }, 60_000);

  it('an owner without an internal URL (listening on a wildcard, none set): 503 OWNER_PANEL_NO_INTERNAL_URL; status from its row', async () => {
    const n = await panelProcess('panel-n', { TETHER_HOST: '0.0.0.0' });
    const { service } = await nodeOn(n, 'logs-proxy-no-url');
    const res = await fetch(logsUrl(a, service.id), { headers: { authorization: `Bearer ${a.operatorToken}` } });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: 'OWNER_PANEL_NO_INTERNAL_URL', message: expect.stringContaining('panel-n') });
    const status = await waitFor(async () => {
      const s = (await a.api('GET', `/v1/services/${service.id}/status`)).body;
      return s.evidence ? s : undefined;
    }, { timeoutMs: 3_000 });
    expect(status.evidence).toMatchObject({ panelId: 'panel-n', source: 'report-row' });
  }, 60_000);
});
