import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgresPair, waitFor, type PostgresPair } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { stopPairSuite } from './helpers/pair-teardown.js';
import { RawAgent } from './helpers/raw-agent.js';

// Fencing through a promotion that loses commits (issue 39): two panels on an
// asynchronous primary and standby, the standby streaming through a relay
// the test holds back. A node's claim committed on the primary while the
// relay is held never reaches the standby; the primary is SIGKILLed and the
// standby promoted. The panel that made the lost claim still holds the node's
// session in memory at a generation the new primary never saw: without a
// floor per timeline, the next claim of that node on the other panel takes
// the same generation and both panels keep the node for good.

let pair: PostgresPair;
const panels: Panel[] = [];
const agents: RawAgent[] = [];
let node: { id: string; name: string; token: string };

const env = (id: string) => ({
  TETHER_PANEL_ID: id,
  TETHER_DB_CONNECT_TIMEOUT_MS: '1000',
  TETHER_DB_QUERY_TIMEOUT_MS: '1000',
  TETHER_READY_TIMEOUT_MS: '400',
  TETHER_PANEL_LEASE_MS: '6000',
});

beforeAll(async () => {
  pair = await startPostgresPair({ replicationRelay: true });
  await pair.createDatabase('tether');
  for (const id of ['fence-a', 'fence-b']) panels.push(await startPanel({ databaseUrl: pair.bothUrl('tether'), env: env(id) }));
  node = await panels[0]!.createNode('fenced-node');
}, 90_000);

afterAll(() => stopPairSuite(agents, panels, pair), 60_000);

const holds = (p: Panel) => p.app.agentSide.registry.get(node.id) !== undefined;
const connect = async (p: Panel) => {
  const agent = await RawAgent.connect({ url: p.url, token: node.token, node: node.name, heartbeatMs: 300 });
  agents.push(agent);
  return agent;
};
const standbyGeneration = async () =>
  Number((await pair.standby.query<{ generation: string }>(`SELECT generation FROM node_owners WHERE node_id = '${node.id}'`, 'tether'))[0]?.generation ?? 0);

describe('a promotion that lost a claim', () => {
  it('the panel holding the lost generation raises the floor: one panel holds the node afterwards, never two', async () => {
    const [a, b] = panels as [Panel, Panel];
    await connect(a);
    await waitFor(() => holds(a));
    await waitFor(async () => (await standbyGeneration()) === 1);
    // From here the standby gets nothing: B's claim of the node (generation 2) commits on the primary only.
    pair.replication!.pause();
    await connect(b);
    await waitFor(() => holds(b) && !holds(a));
    expect(b.app.cluster!.generationOf(b.app.agentSide.registry.get(node.id)!.id)).toBe(2);
    expect(await standbyGeneration()).toBe(1);

    await pair.primary.kill();
    await pair.standby.promote();
    // Both panels reach the promoted server (their lease renewals reconnect) and finish its fencing check.
    await waitFor(() => panels.every((p) => p.app.panelStatus.database.fencedTimeline === 2), { timeoutMs: 15_000 });
    expect(holds(b)).toBe(true);

    // The node's agent reaches A now (say its connection to B looked dead from its side): A claims it.
    await connect(a);
    const samples: boolean[] = [];
    const started = performance.now();
    while (performance.now() - started < 3_000) {
      samples.push(holds(a) && holds(b));
      await new Promise((r) => setTimeout(r, 100));
    }
    // The supersede reaches B within a signal's delivery: after the first half second, never both.
    expect(samples.slice(5).filter(Boolean)).toEqual([]);
    expect([holds(a), holds(b)]).toEqual([true, false]);
    const generation = Number(
      (await pair.standby.query<{ generation: string }>(`SELECT generation FROM node_owners WHERE node_id = '${node.id}'`, 'tether'))[0]!.generation,
    );
    expect(generation).toBeGreaterThan(2);
    expect(a.app.cluster!.generationOf(a.app.agentSide.registry.get(node.id)!.id)).toBe(generation);
    const floors = await pair.standby.query<{ timeline: number; floor: string }>('SELECT timeline, floor FROM fencing_floors ORDER BY timeline', 'tether');
    expect(floors.find((f) => f.timeline === 2)?.floor).toBe('2');
  }, 90_000);
});
