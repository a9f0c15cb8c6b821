import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';
import { openTextStream, startHeldRequest, type TextStream } from './helpers/text-stream.js';

// Waits and deployment event streams are capped per token and per team (429
// STREAMS_EXHAUSTED) and end when their client leaves (issue 25: on the main
// this test was written against, 2,000 event streams from one token were all
// accepted, and 40 ?wait=600 whose clients left kept reading their rows). Both
// ways: exactly the cap is served, one more is refused, a freed place serves again.

const PER_TOKEN = 3;
const PER_TEAM = 5;
let panel: Panel;
let deploymentId: string;
let serviceId: string;
let agent: RawAgent;

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_STREAMS_PER_TOKEN: String(PER_TOKEN), TETHER_STREAMS_PER_TEAM: String(PER_TEAM) } });
  const node = await panel.createNode('held-node');
  const service = await panel.createService(node.id);
  serviceId = service.id;
  agent = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name });
  // ACKed, never finished: `delivered` stays open to watch.
  const deployed = await panel.api('POST', `/v1/services/${service.id}/deployments`);
  deploymentId = deployed.body.id;
}, 60_000);
afterAll(async () => {
  agent?.close();
  await panel?.close();
});

async function teamToken(teamId: string): Promise<string> {
  const made = await panel.api('POST', `/v1/teams/${teamId}/tokens`, { name: `t${Math.random()}` });
  return made.body.token;
}

const events = (token: string) => openTextStream(`${panel.url}/v1/deployments/${deploymentId}/events`, { headers: { authorization: `Bearer ${token}` } });

describe('caps on waits and event streams', () => {
  it(`one token holds ${PER_TOKEN}, its team ${PER_TEAM}; the next gets 429 STREAMS_EXHAUSTED; another team is not affected; a client that leaves frees its place`, async () => {
    const teamId = (await panel.prisma.service.findUniqueOrThrow({ where: { id: serviceId } })).teamId;
    const [t1, t2] = [await teamToken(teamId), await teamToken(teamId)];
    const open: TextStream[] = [];
    for (let i = 0; i < PER_TOKEN; i++) open.push(await events(t1));
    expect(open.map((s) => s.status)).toEqual([200, 200, 200]);
    const refused = await events(t1);
    expect(refused.status).toBe(429);
    await refused.ended;
    expect(JSON.parse(refused.text)).toMatchObject({ error: { code: 'STREAMS_EXHAUSTED' } });
    // A ?wait= past the cap deploys nothing.
    const before = await panel.prisma.deployment.count();
    const wait = await panel.api('POST', `/v1/services/${serviceId}/deployments?wait=5`, undefined, t1);
    expect(wait.status).toBe(429);
    expect(await panel.prisma.deployment.count()).toBe(before);
    // The team: t2 gets the two places left, not a third.
    open.push(await events(t2), await events(t2));
    expect(open.slice(3).map((s) => s.status)).toEqual([200, 200]);
    const teamFull = await events(t2);
    expect(teamFull.status).toBe(429);
    // An operator is not held to the team's cap.
    const operator = await events(panel.operatorToken);
    expect(operator.status).toBe(200);
    // A client that leaves frees its place at once.
    open[0]!.close();
    await waitFor(() => panel.app.panelStatus.heldStreams('events') === PER_TEAM);
    // What the test reads in memory, an operator reads at GET /v1/panel; a team's token may not.
    const seen = await panel.api('GET', '/v1/panel');
    expect(seen.status).toBe(200);
    expect(seen.body.heldStreams).toEqual({ events: PER_TEAM, wait: 0, logs: 0 });
    expect(seen.body.outbox).toMatchObject({ pending: expect.any(Number), replayed: 0, spilled: 0 });
    expect((await panel.api('GET', '/v1/panel', undefined, t1)).status).toBe(403);
    const again = await events(t1);
    expect(again.status).toBe(200);
    for (const s of [...open, again, operator]) s.close();
    await waitFor(() => panel.app.panelStatus.heldStreams() === 0);
  });

  it('a ?wait= whose client leaves ends then: its place is freed and its watch stops', async () => {
    const teamId = (await panel.prisma.service.findUniqueOrThrow({ where: { id: serviceId } })).teamId;
    const token = await teamToken(teamId);
    const waits = Array.from({ length: PER_TOKEN }, () =>
      startHeldRequest(`${panel.url}/v1/services/${serviceId}/deployments?wait=600`, { method: 'POST', headers: { authorization: `Bearer ${token}` } }),
    );
    await waitFor(() => panel.app.panelStatus.heldStreams('wait') === PER_TOKEN);
    const left = performance.now();
    for (const w of waits) w.close();
    await waitFor(() => panel.app.panelStatus.heldStreams('wait') === 0, { timeoutMs: 2_000 });
    // Freed within one watch interval (250 ms) and a little: not the 600 s of the wait.
    expect(performance.now() - left).toBeLessThan(600);
  });
});
