import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, LOG_LIMITS, type LogLine, type LogsCredit, type LogsOpen } from '@tether/protocol';
import { readLogs } from './helpers/log-reader.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// The panel's side of log streams against a hand-driven agent: capability
// negotiation, credit (granted as the client reads, a chunk past it ends the
// stream), the agent's end, the session's end, and text sanitised by the
// panel whatever the agent sent.

const WINDOW = LOG_LIMITS.maxChunkBytes;
let panel: Panel;
const agents: RawAgent[] = [];

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_LOG_WINDOW_BYTES: String(WINDOW) } });
});
afterAll(async () => {
  for (const a of agents) a.socket.terminate();
  await panel?.close();
});

async function nodeWithService(name: string, capabilities?: string[]) {
  const node = await panel.createNode(name);
  const agent = await RawAgent.connect({ url: panel.url, token: node.token, node: name, ...(capabilities ? { capabilities } : {}) });
  agents.push(agent);
  const service = await panel.createService(node.id);
  return { agent, service, url: `${panel.url}/v1/services/${service.id}/logs` };
}

const line = (text: string, i = 0): LogLine => ({ containerId: 'c0ffee', replica: 'tether-web-0', stream: 'stdout', time: `2026-12-01T05:00:00.${String(i).padStart(9, '0')}Z`, text });

describe('log streams on the panel', () => {
  it('an agent without the capability: 501 LOGS_NOT_SUPPORTED; welcome confirms `logs` to one that names it', async () => {
    const old = await nodeWithService('logs-old');
    const res = await fetch(old.url, { headers: { authorization: `Bearer ${panel.operatorToken}` } });
    expect(res.status).toBe(501);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('LOGS_NOT_SUPPORTED');
    const modern = await nodeWithService('logs-new', [CAPABILITIES.LOGS, 'future.thing']);
    expect(modern.agent.welcome.capabilities).toEqual([CAPABILITIES.LOGS]);
  });

  it('relays chunks as NDJSON (re-sanitised), grants credit as the client reads, ends with the agent\'s logs.end', async () => {
    const { agent, service, url } = await nodeWithService('logs-relay', [CAPABILITIES.LOGS]);
    const reader = await readLogs(`${url}?tail=5&since=10m&follow=1`, panel.operatorToken);
    expect(reader.status).toBe(200);
    const open = await agent.waitFor<LogsOpen>((m) => m.type === 'logs.open');
    expect(open).toMatchObject({ serviceId: service.id, tail: 5, follow: true, credit: WINDOW });
    expect(Date.now() - Date.parse(open.since!)).toBeGreaterThanOrEqual(600_000);
    expect(Date.now() - Date.parse(open.since!)).toBeLessThan(610_000);
    // An agent that did not sanitise: the panel escapes control characters anyway.
    agent.send({ type: 'logs.chunk', id: 'c-1', streamId: open.streamId, lines: [line('plain'), line('esc \u001b[31m bell \u0007', 1)] });
    await waitUntil(() => reader.logs().length === 2);
    expect(reader.logs().map((r) => r.text)).toEqual(['plain', 'esc \\u001b[31m bell \\u0007']);
    expect(reader.logs()[0]).toEqual({ type: 'log', replica: 'tether-web-0', containerId: 'c0ffee', stream: 'stdout', time: '2026-12-01T05:00:00.000000000Z', text: 'plain' });
    // Use most of the window; the client reads it, so credit comes back.
    const big = Array.from({ length: 40 }, (_, i) => line('x'.repeat(1_000), i + 2));
    agent.send({ type: 'logs.chunk', id: 'c-2', streamId: open.streamId, lines: big });
    const credit = await agent.waitFor<LogsCredit>((m) => m.type === 'logs.credit');
    expect(credit.streamId).toBe(open.streamId);
    expect(credit.bytes).toBeGreaterThan(16 * 1024);
    agent.send({ type: 'logs.end', id: 'e-1', streamId: open.streamId, code: 'DOCKER_UNAVAILABLE', reason: 'reading logs from Docker failed: socket hang up' });
    expect(await reader.done).toEqual({ type: 'end', code: 'DOCKER_UNAVAILABLE', reason: 'reading logs from Docker failed: socket hang up' });
    expect(reader.logs()).toHaveLength(42);
  });

  it('a chunk past the credit or over 64 KiB ends the stream (LOG_CREDIT_EXCEEDED) and the agent is told logs.close; the session lives on', async () => {
    const { agent, url } = await nodeWithService('logs-greedy', [CAPABILITIES.LOGS]);
    const reader = await readLogs(`${url}?follow=1`, panel.operatorToken);
    const open = await agent.waitFor<LogsOpen>((m) => m.type === 'logs.open');
    // One frame over the window (the panel decodes frames up to 1 MiB; the credit is what bounds a chunk).
    agent.send({ type: 'logs.chunk', id: 'g-1', streamId: open.streamId, lines: Array.from({ length: 70 }, (_, i) => line('y'.repeat(1_000), i)) });
    expect(await reader.done).toMatchObject({ type: 'end', code: 'LOG_CREDIT_EXCEEDED', reason: expect.stringMatching(/^the agent sent a chunk of \d+ bytes \(most: 65536\)/) });
    expect(reader.logs()).toEqual([]);
    await agent.waitFor((m) => m.type === 'logs.close' && m.streamId === open.streamId);
    expect(agent.closed).toBeNull();
  });

  it('the client leaving sends logs.close; the session ending mid-stream ends the stream with SESSION_ENDED and why', async () => {
    const { agent, url } = await nodeWithService('logs-ends', [CAPABILITIES.LOGS]);
    const leaving = await readLogs(`${url}?follow=1`, panel.operatorToken);
    const first = await agent.waitFor<LogsOpen>((m) => m.type === 'logs.open');
    leaving.close();
    await agent.waitFor((m) => m.type === 'logs.close' && m.streamId === first.streamId);
    const staying = await readLogs(`${url}?follow=1`, panel.operatorToken);
    await agent.waitFor<LogsOpen>((m) => m.type === 'logs.open' && m.streamId !== first.streamId);
    agent.socket.close(1001, 'agent stopping');
    expect(await staying.done).toEqual({ type: 'end', code: 'SESSION_ENDED', reason: "the node's session ended: closed by agent (1001: agent stopping)" });
    expect(panel.app.agentSide.logs.size).toBe(0);
  });
});

async function waitUntil(check: () => boolean, timeoutMs = 3_000) {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
