import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES } from '@tether/protocol';
import { waitFor } from '@tether/testkit';
import { readLogs, type LogReader } from './helpers/log-reader.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// Log streams on a node are shared fairly and do not idle forever (issue 25:
// on the main this test was written against, team A's follows filled the
// node's cap of 8 and team B's follow of its own service got 429; idle
// follows never ended). At the cap a team holding none gets one (the newest
// of the team holding most ends LOG_STREAMS_EXHAUSTED); a team that already
// holds one does not; a follow with no line ends LOG_FOLLOW_IDLE at
// TETHER_LOG_FOLLOW_IDLE_MS, not before, with keep-alive notices meanwhile.

const CAP = 4;
const IDLE_MS = 2_000;
let panel: Panel;
let agent: RawAgent;
let nodeId: string;

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_LOG_STREAMS_PER_NODE: String(CAP), TETHER_LOG_FOLLOW_IDLE_MS: String(IDLE_MS) } });
  const node = await panel.createNode('fair-node');
  nodeId = node.id;
  agent = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, capabilities: [CAPABILITIES.LOGS] });
}, 60_000);
afterAll(async () => {
  agent?.close();
  await panel?.close();
});

async function teamWithService(name: string) {
  const team = (await panel.api('POST', '/v1/teams', { name })).body as { id: string };
  const token = (await panel.api('POST', `/v1/teams/${team.id}/tokens`, { name: `${name}-t` })).body.token as string;
  const service = await panel.prisma.service.create({ data: { teamId: team.id, name: `${name}-svc`, image: 'busybox:1', replicas: 1, nodeId } });
  return { token, serviceId: service.id };
}

const follow = (serviceId: string, token: string) => readLogs(`${panel.url}/v1/services/${serviceId}/logs?follow=1`, token);

describe('log streams per node', () => {
  it(`team A holds all ${CAP}; team B still gets one (A's newest ends), team A's next is 429, B's second is 429`, async () => {
    const a = await teamWithService('fair-a');
    const b = await teamWithService('fair-b');
    const held: LogReader[] = [];
    for (let i = 0; i < CAP; i++) held.push(await follow(a.serviceId, a.token));
    expect(held.map((r) => r.status)).toEqual(Array(CAP).fill(200));
    expect((await follow(a.serviceId, a.token)).status).toBe(429);
    const mine = await follow(b.serviceId, b.token);
    expect(mine.status).toBe(200);
    const bumped = await held[CAP - 1]!.done;
    expect(bumped).toMatchObject({ type: 'end', code: 'LOG_STREAMS_EXHAUSTED' });
    // A's other streams go on; B, now holding one, gets no second at the cap.
    for (const r of held.slice(0, CAP - 1)) expect(r.records.some((x) => x.type === 'end')).toBe(false);
    expect((await follow(b.serviceId, b.token)).status).toBe(429);
    for (const r of [...held, mine]) r.close();
    await waitFor(() => panel.app.agentSide.logs.size === 0);
  });

  it(`a follow with no line ends LOG_FOLLOW_IDLE after ${IDLE_MS} ms, not before, with keep-alive notices meanwhile`, async () => {
    const c = await teamWithService('idle-c');
    const started = performance.now();
    const reader = await follow(c.serviceId, c.token);
    expect(reader.status).toBe(200);
    const end = await reader.done;
    const ms = performance.now() - started;
    expect(end).toMatchObject({ type: 'end', code: 'LOG_FOLLOW_IDLE' });
    expect(ms).toBeGreaterThanOrEqual(IDLE_MS - 50);
    expect(ms).toBeLessThan(IDLE_MS + 700);
    const notices = reader.records.filter((r) => r.type === 'notice' && r.code === 'LOG_KEEPALIVE');
    expect(notices.length).toBeGreaterThanOrEqual(2);
    expect(notices.length).toBeLessThanOrEqual(4);
  });
});
