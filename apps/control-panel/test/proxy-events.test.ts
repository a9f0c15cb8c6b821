import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, EXAMPLE_MESSAGES, type ProxyEvents } from '@tether/protocol';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// proxy.events through the real gateway into Postgres: the capability is
// negotiated in hello/welcome, events are stored under (node, epoch, seq) and
// ACKed after the commit, and a resend (a lost ACK, a new session) is stored
// once. An agent without the capability is still accepted.

let panel: Panel;
const agents: RawAgent[] = [];

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_ALLOCATIONS: 'on' } });
});
afterAll(async () => {
  for (const a of agents) a.socket.terminate();
  await panel?.close();
});

async function connect(token: string, capabilities?: string[]) {
  const agent = await RawAgent.connect({ url: panel.url, token, ...(capabilities ? { capabilities } : {}) });
  agents.push(agent);
  return agent;
}

const events: ProxyEvents['events'] = [
  { event: 'reload', epoch: 1_764_565_200_000, seq: 0, at: '2026-12-01T05:00:00.000Z', kind: 'initial', hashBefore: null, hashAfter: 'h1', reason: 'added a.example.com' },
  { event: 'reload', epoch: 1_764_565_200_000, seq: 1, at: '2026-12-01T05:01:00.000Z', kind: 'repair-empty', hashBefore: 'h1', hashAfter: 'h1', reason: 'repaired: proxy was running an empty config' },
  { event: 'canary.drop', epoch: 1_764_565_200_000, seq: 2, at: '2026-12-01T05:01:00.100Z', cause: 'proxy-restarted', reloadReason: null, closeCode: 1006, reconnectMs: 850 },
];

describe('proxy.events', () => {
  it('negotiates the capability: confirmed when both speak it, unknown names ignored, absent for older agents', async () => {
    const node = await panel.createNode('caps-new');
    const modern = await connect(node.token, [CAPABILITIES.PROXY_EVENTS, 'future.thing']);
    expect(modern.welcome.capabilities).toEqual([CAPABILITIES.PROXY_EVENTS]);
    const old = await panel.createNode('caps-old');
    const legacy = await connect(old.token);
    expect(legacy.welcome).not.toHaveProperty('capabilities');
    // An agent that did not announce it may not send it.
    legacy.send({ type: 'proxy.events', id: 'e1', events });
    expect(await legacy.waitFor((m) => m.type === 'error')).toMatchObject({ code: 'UNEXPECTED_MESSAGE', ref: 'e1' });
  });

  it('confirms workload.allocations to an agent that names it, and refuses allocations.status from one that did not', async () => {
    const node = await panel.createNode('caps-allocations');
    const agent = await connect(node.token, [CAPABILITIES.PROXY_EVENTS, CAPABILITIES.WORKLOAD_ALLOCATIONS]);
    expect(agent.welcome.capabilities).toEqual([CAPABILITIES.PROXY_EVENTS, CAPABILITIES.WORKLOAD_ALLOCATIONS]);
    // Accepted on that session: no error comes back (a ping round trip later, nothing refused it).
    agent.send({ ...EXAMPLE_MESSAGES['allocations.status'], id: 'st0' });
    const other = await panel.createNode('caps-no-allocations');
    const without = await connect(other.token, [CAPABILITIES.PROXY_EVENTS]);
    expect(without.welcome.capabilities).toEqual([CAPABILITIES.PROXY_EVENTS]);
    without.send({ ...EXAMPLE_MESSAGES['allocations.status'], id: 'st1' });
    expect(await without.waitFor((m) => m.type === 'error' && m.ref === 'st1')).toMatchObject({ code: 'UNEXPECTED_MESSAGE' });
    expect(agent.received.some((m) => m.type === 'error' && m.ref === 'st0')).toBe(false);
  });

  it('stores every event once across resends and sessions, ACKs each message after the commit', async () => {
    const node = await panel.createNode('events-1');
    const first = await connect(node.token, [CAPABILITIES.PROXY_EVENTS]);
    first.send({ type: 'proxy.events', id: 'm1', events: events.slice(0, 2) });
    await first.waitFor((m) => m.type === 'ack' && m.ref === 'm1');
    // The ACK was lost: the agent sends the same events again, with one more.
    first.send({ type: 'proxy.events', id: 'm2', events });
    await first.waitFor((m) => m.type === 'ack' && m.ref === 'm2');
    // A new session (the old one superseded) resends everything once more.
    const second = await connect(node.token, [CAPABILITIES.PROXY_EVENTS]);
    second.send({ type: 'proxy.events', id: 'm3', events });
    await second.waitFor((m) => m.type === 'ack' && m.ref === 'm3');

    const reloads = await panel.api('GET', `/v1/nodes/${node.id}/reloads`);
    expect(reloads.status).toBe(200);
    expect(reloads.body.reloads.map((r: { kind: string; reason: string; at: string }) => [r.kind, r.reason, r.at])).toEqual([
      ['repair-empty', 'repaired: proxy was running an empty config', '2026-12-01T05:01:00.000Z'],
      ['initial', 'added a.example.com', '2026-12-01T05:00:00.000Z'],
    ]);
    const drops = await panel.api('GET', `/v1/nodes/${node.id}/canary-drops`);
    expect(drops.status).toBe(200);
    expect(drops.body.drops).toEqual([{ at: '2026-12-01T05:01:00.100Z', cause: 'proxy-restarted', reloadReason: null, closeCode: 1006, reconnectMs: 850 }]);
  });
});
