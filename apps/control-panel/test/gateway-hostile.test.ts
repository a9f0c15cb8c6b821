import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FRAME_ERROR_CODES, MAX_ERROR_REPLIES_PER_SECOND, MAX_FRAME_BYTES } from '@tether/protocol';
import { waitFor } from '@tether/testkit';
import { TokenBucket, refuseByHead } from '../src/agent-gateway/frame-guard.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// One session's bad frames must cost the others nothing: the panel answers
// at most MAX_ERROR_REPLIES_PER_SECOND of them a second, stops reading a peer
// that sends more rejected bytes than MAX_INVALID_BYTES_PER_SECOND, and
// refuses a frame of a type it does not take without parsing it.

let panel: Panel;

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_SESSION_IDLE_MS: '10000', TETHER_PING_INTERVAL_MS: '60000' } });
});
afterAll(async () => panel?.close());

const errors = (agent: RawAgent) => agent.received.filter((m) => m.type === 'error').length;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('error replies', () => {
  it(`answers at most ${MAX_ERROR_REPLIES_PER_SECOND} rejected frames a second, counts every one, and keeps the session`, async () => {
    const node = await panel.createNode('flood-1');
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 0 });
    const counted = () => panel.app.agentSide.registry.get(node.id)!.invalidFrames;
    const started = Date.now();
    // 60 rejected frames, a valid heartbeat after every third so the streak never closes the session.
    for (let i = 0; i < 60; i++) {
      agent.sendRaw(`{"bad":${i}`);
      if (i % 3 === 2) agent.heartbeat();
    }
    await waitFor(() => counted() === 60);
    await sleep(50);
    const burst = errors(agent);
    const elapsed = (Date.now() - started) / 1000;
    // The whole bucket, plus what refilled while the burst was read; never one per frame.
    expect(burst).toBeGreaterThanOrEqual(MAX_ERROR_REPLIES_PER_SECOND);
    expect(burst).toBeLessThanOrEqual(MAX_ERROR_REPLIES_PER_SECOND + Math.ceil(elapsed * MAX_ERROR_REPLIES_PER_SECOND));
    // A second later the bucket has refilled: the next rejected frame is answered again.
    await sleep(1_000);
    agent.sendRaw('{"bad":"again"');
    await waitFor(() => errors(agent) === burst + 1);
    expect(panel.app.agentSide.registry.get(node.id)?.closed).toBeNull();
    agent.close();
  });
});

describe('read budget', () => {
  it('stops reading a peer that sends megabytes of rejected frames, while another session is served at once', async () => {
    const bystanderNode = await panel.createNode('calm-1');
    const bystander = await RawAgent.connect({ url: panel.url, token: bystanderNode.token, heartbeatMs: 0 });
    const node = await panel.createNode('hostile-1');
    const hostile = await RawAgent.connect({ url: panel.url, token: node.token, heartbeatMs: 0 });
    const beats = (id: string) => panel.app.agentSide.registry.get(id)!.heartbeats;
    // 3 MiB of frames over the size limit (rejected before parsing), then a valid heartbeat.
    const big = `{"type":"heartbeat","pad":"${'x'.repeat(MAX_FRAME_BYTES)}"}`;
    for (let i = 0; i < 3; i++) {
      hostile.sendRaw(big);
      hostile.heartbeat();
    }
    const sent = Date.now();
    await waitFor(() => panel.app.agentSide.registry.get(node.id)!.invalidFrames >= 2);
    // While the hostile peer is paused, the bystander's frame is handled at once.
    const before = beats(bystanderNode.id);
    const asked = Date.now();
    bystander.heartbeat();
    await waitFor(() => beats(bystanderNode.id) > before);
    expect(Date.now() - asked).toBeLessThan(300);
    // The hostile peer's last heartbeat waits out the pause: 3 MiB against a 1 MiB/s budget with a 1 MiB bucket.
    await waitFor(() => beats(node.id) === 3, { timeoutMs: 8_000 });
    const waited = Date.now() - sent;
    expect(waited).toBeGreaterThanOrEqual(900);
    expect(waited).toBeLessThan(4_000);
    expect(panel.app.agentSide.registry.get(node.id)!.invalidFrames).toBe(3);
    hostile.close();
    bystander.close();
  });
});

describe('refusal by head', () => {
  it('refuses a frame whose leading type the panel does not take, without parsing the rest', () => {
    const accepted = new Set(['heartbeat']);
    // Not JSON after the head: a full parse would say INVALID_JSON; the head alone decides.
    const ping = refuseByHead(Buffer.from('{"type":"ping","id":"p1", broken'), false, accepted);
    expect(ping).toMatchObject({ code: FRAME_ERROR_CODES.UNEXPECTED_MESSAGE, ref: 'p1' });
    expect(refuseByHead(Buffer.from('{"type":"hullo"}'), false, accepted)).toMatchObject({ code: FRAME_ERROR_CODES.UNKNOWN_TYPE, ref: null });
    // Accepted type, another key first, binary: left to the full decode.
    expect(refuseByHead(Buffer.from('{"type":"heartbeat"'), false, accepted)).toBeNull();
    expect(refuseByHead(Buffer.from('{"id":"x","type":"ping"}'), false, accepted)).toBeNull();
    expect(refuseByHead(Buffer.from('{"type":"ping"}'), true, accepted)).toBeNull();
  });

  it('token bucket: a burst of its capacity, then its rate; debt tells how long to wait', () => {
    let now = 0;
    const bucket = new TokenBucket(10, 10, () => now);
    expect(Array.from({ length: 12 }, () => bucket.take()).filter(Boolean)).toHaveLength(10);
    now = 100;
    expect(bucket.take()).toBe(true);
    expect(bucket.take()).toBe(false);
    expect(bucket.spend(20)).toBe(2_000);
  });
});
