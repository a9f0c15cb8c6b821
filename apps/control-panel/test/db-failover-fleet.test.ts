import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgresPair, waitFor, type PostgresPair } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { stopPairSuite } from './helpers/pair-teardown.js';
import { RawAgent } from './helpers/raw-agent.js';

// Three panels and 50 agents through a PostgreSQL failover (issue 39): a
// synchronous standby promoted after the primary is SIGKILLed, within the
// panels' lease. No session is torn down by it, every panel writes again
// within 2 s of the promotion, and every deploy answered 202 exists after.

const PANELS = 3;
const AGENTS = 50;
const RESUME_MS = 2_000;

let pair: PostgresPair;
const panels: Panel[] = [];
const agents: RawAgent[] = [];
/** Per panel: services on nodes whose session that panel holds. */
const servicesOf: string[][] = [];

beforeAll(async () => {
  pair = await startPostgresPair();
  await pair.createDatabase('tether');
  await pair.makeSynchronous();
  for (let i = 0; i < PANELS; i++) {
    panels.push(
      await startPanel({
        databaseUrl: pair.bothUrl('tether'),
        env: { TETHER_PANEL_ID: `fleet-${i}`, TETHER_DB_CONNECT_TIMEOUT_MS: '1000', TETHER_DB_QUERY_TIMEOUT_MS: '1000', TETHER_READY_TIMEOUT_MS: '400' },
      }),
    );
    servicesOf.push([]);
  }
  for (let n = 0; n < AGENTS; n++) {
    const owner = n % PANELS;
    const node = await panels[owner]!.createNode(`fleet-node-${n}`);
    servicesOf[owner]!.push((await panels[owner]!.createService(node.id)).id);
    agents.push(await RawAgent.connect({ url: panels[owner]!.url, token: node.token, node: node.name, heartbeatMs: 500 }));
  }
  await waitFor(() => panels.reduce((sum, p) => sum + p.app.agentSide.registry.size, 0) === AGENTS, { timeoutMs: 20_000 });
}, 120_000);

afterAll(() => stopPairSuite(agents, panels, pair), 60_000);

const sessionIds = () => new Set(panels.flatMap((p) => p.app.agentSide.registry.list().map((s) => s.id)));

describe('three panels, 50 agents, the primary killed and the standby promoted', () => {
  it('tears no session down, resumes writes on every panel within 2 s of the promotion, keeps every 202', async () => {
    const before = sessionIds();
    expect(before.size).toBe(AGENTS);
    const answers: { panel: number; at: number; status: number; code?: string; id?: string }[] = [];
    let running = true;
    const loops = panels.map(async (panel, i) => {
      let k = 0;
      while (running) {
        const serviceId = servicesOf[i]![k++ % servicesOf[i]!.length]!;
        const r = await panel.api('POST', `/v1/services/${serviceId}/deployments`);
        answers.push({ panel: i, at: performance.now(), status: r.status, code: r.body?.error?.code, id: r.body?.id });
        await new Promise((res) => setTimeout(res, 50));
      }
    });
    await waitFor(() => panels.every((_, i) => answers.some((a) => a.panel === i && a.status === 202)));
    await pair.primary.kill();
    await pair.standby.promote();
    const promotedAt = performance.now();
    await waitFor(() => panels.every((_, i) => answers.some((a) => a.panel === i && a.at > promotedAt && a.status === 202)), { timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 1_000));
    running = false;
    await Promise.all(loops);

    for (let i = 0; i < PANELS; i++) {
      const first = answers.find((a) => a.panel === i && a.at > promotedAt && a.status === 202)!;
      expect(first.at - promotedAt).toBeLessThan(RESUME_MS);
    }
    const odd = answers.filter((a) => a.status !== 202 && !(a.status === 503 && ['DATABASE_UNAVAILABLE', 'DATABASE_NOT_PRIMARY'].includes(a.code!)));
    expect(odd).toEqual([]);
    const kept = new Set((await pair.standby.query<{ id: string }>('SELECT id FROM deployments', 'tether')).map((r) => r.id));
    expect(answers.filter((a) => a.status === 202 && !kept.has(a.id!))).toEqual([]);
    // The same 50 sessions, none torn down and none replaced.
    expect([...sessionIds()].sort()).toEqual([...before].sort());
    for (const p of panels) expect(p.app.panelStatus.database.server).toBe(`127.0.0.1:${pair.standby.port}`);
  }, 90_000);
});
