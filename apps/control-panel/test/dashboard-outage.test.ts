import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blackhole, ensureIptables, startTestPostgres, waitFor, type Blackhole, type TestPostgres } from '@tether/testkit';
import type { FleetRow } from '../src/dashboard/fleet-rows.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// The fleet page while the database does not answer (its port blackholed: no
// FIN, no RST, queries hang): a signed-in operator stays signed in, can sign
// in again from the cached token list, and still sees a node that goes silent
// turn unreachable within the deadline plus one batch; what needs the
// database answers 503 DATABASE_UNAVAILABLE after its deadline.

const ready = (await ensureIptables()).available;
const IDLE_MS = 1_000;
const DB_DEADLINE_MS = 500;

describe.skipIf(!ready)('fleet page during a database outage', () => {
  let pg: TestPostgres;
  let panel: Panel;
  let hole: Blackhole | undefined;
  let agent: RawAgent;

  beforeAll(async () => {
    pg = await startTestPostgres();
    panel = await startPanel({ pg, env: { TETHER_SESSION_IDLE_MS: String(IDLE_MS), TETHER_FLEET_REFRESH_MS: '200', TETHER_HEARTBEAT_INTERVAL_MS: '100', TETHER_DASHBOARD_DB_DEADLINE_MS: String(DB_DEADLINE_MS) } });
    const node = await panel.createNode('outage-node');
    agent = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, heartbeatMs: 100 });
  }, 60_000);

  afterAll(async () => {
    hole?.release();
    agent?.close();
    await panel?.close();
    await pg?.stop();
  });

  it('keeps cookie sessions and the live page working', async () => {
    const signIn = () =>
      fetch(`${panel.url}/dashboard/api/sign-in`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: panel.url },
        body: JSON.stringify({ token: panel.operatorToken }),
      });
    const cookie = (await signIn()).headers.get('set-cookie')!.split(';')[0]!;
    // Wait for the directory to know the node, then cut the database off.
    const nodeId = (await panel.prisma.node.findUniqueOrThrow({ where: { name: 'outage-node' } })).id;
    await waitFor(async () => {
      const r = await fetch(`${panel.url}/dashboard/api/me`, { headers: { cookie } });
      return (await r.json() as { signedIn: boolean }).signedIn;
    });
    hole = blackhole(new URL(pg.url).port === '' ? 5432 : Number(new URL(pg.url).port));

    // The outage is real: the panel's own readiness check cannot reach the database.
    const readyz = await fetch(`${panel.url}/readyz`, { signal: AbortSignal.timeout(1_500) }).then((r) => r.status, () => 'no answer');
    expect(readyz).not.toBe(200);
    const me = (await (await fetch(`${panel.url}/dashboard/api/me`, { headers: { cookie } })).json()) as { signedIn: boolean };
    expect(me.signedIn).toBe(true);
    const again = await signIn();
    expect(again.status).toBe(200);

    const controller = new AbortController();
    const res = await fetch(`${panel.url}/dashboard/api/stream`, { headers: { cookie }, signal: controller.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const rowOf = (): FleetRow | undefined => {
      let found: FleetRow | undefined;
      for (const m of text.matchAll(/^data: (.*)$/gm)) {
        const data = JSON.parse(m[1]!) as { rows?: FleetRow[] };
        found = data.rows?.find((r) => r.id === nodeId) ?? found;
      }
      return found;
    };
    // One read in flight at a time, kept across timeouts (a dropped read would lose its chunk).
    let pending: ReturnType<typeof reader.read> | null = null;
    const readUntil = async (done: () => boolean, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      while (!done()) {
        if (Date.now() > deadline) throw new Error(`stream did not show it in ${timeoutMs} ms (agent closed: ${JSON.stringify(agent.closed)}, last frame sent at ${agent.lastSentAt}): ${text.slice(-1500)}`);
        pending ??= reader.read();
        const chunk = await Promise.race([pending, new Promise<null>((r) => setTimeout(() => r(null), 100))]);
        if (chunk) {
          pending = null;
          if (!chunk.done) text += decoder.decode(chunk.value, { stream: true });
        }
      }
    };
    await readUntil(() => rowOf()?.state === 'reachable', 3_000);
    agent.goSilent();
    await readUntil(() => rowOf()?.state === 'unreachable', IDLE_MS + 1_000 + 2_000);
    // From the agent's last frame (the panel read it no earlier): not before the deadline.
    const elapsed = performance.now() - agent.lastSentAt;
    expect(rowOf()).toMatchObject({ state: 'unreachable', reason: 'idle timeout' });
    expect(elapsed).toBeGreaterThanOrEqual(IDLE_MS);
    expect(elapsed).toBeLessThanOrEqual(IDLE_MS + 1_000 + 300);
    // The node's history needs the database: a coded 503 after the deadline, not a hang.
    const started = Date.now();
    const detail = await fetch(`${panel.url}/dashboard/api/nodes/${nodeId}`, { headers: { cookie } });
    const took = Date.now() - started;
    expect(detail.status).toBe(503);
    expect(((await detail.json()) as { error: { code: string } }).error.code).toBe('DATABASE_UNAVAILABLE');
    expect(took).toBeGreaterThanOrEqual(DB_DEADLINE_MS - 20);
    expect(took).toBeLessThan(DB_DEADLINE_MS + 500);
    controller.abort();
    hole.release();
    hole = undefined;
  });
});
