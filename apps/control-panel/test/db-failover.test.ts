import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgresPair, waitFor, type PostgresPair } from '@tether/testkit';
import { PrimaryLocator } from '../src/db/primary-locator.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';
import { openTextStream } from './helpers/text-stream.js';

// The panel through a PostgreSQL failover (issue 39), on real servers: a
// primary and a synchronous streaming standby made from a base backup, both
// named in DATABASE_URL. The primary is SIGKILLed and the standby promoted
// with pg_promote(); then the old primary comes back writable on its old
// timeline (split brain). Deploys run throughout.

const CONNECT_MS = 1_000;
const QUERY_MS = 1_000;
/** Writes resume within this of the promotion (issue 39). */
const RESUME_MS = 2_000;
const UNAVAILABLE = ['DATABASE_UNAVAILABLE', 'DATABASE_NOT_PRIMARY'];

let pair: PostgresPair;
let panel: Panel;
let agent: RawAgent;
let serviceId: string;

interface Answer {
  at: number;
  ms: number;
  status: number;
  code: string | undefined;
  retryAfter: string | null;
  id: string | undefined;
}

beforeAll(async () => {
  pair = await startPostgresPair();
  await pair.createDatabase('tether');
  await pair.makeSynchronous();
  panel = await startPanel({
    databaseUrl: pair.bothUrl('tether'),
    env: {
      TETHER_DB_CONNECT_TIMEOUT_MS: String(CONNECT_MS),
      TETHER_DB_QUERY_TIMEOUT_MS: String(QUERY_MS),
      TETHER_READY_TIMEOUT_MS: '400',
      TETHER_OUTBOX_RETRY_MAX_MS: '200',
    },
  });
  const node = await panel.createNode('failover-a');
  serviceId = (await panel.createService(node.id)).id;
  agent = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, heartbeatMs: 300 });
  await waitFor(() => panel.app.agentSide.registry.size === 1);
}, 90_000);

afterAll(async () => {
  agent?.close();
  await panel?.close();
  await pair?.stop();
}, 60_000);

async function deploy(): Promise<Answer> {
  const started = performance.now();
  const res = await fetch(`${panel.url}/v1/services/${serviceId}/deployments`, { method: 'POST', headers: { authorization: `Bearer ${panel.operatorToken}` } });
  const body = (await res.json().catch(() => null)) as { id?: string; error?: { code: string } } | null;
  return { at: performance.now(), ms: performance.now() - started, status: res.status, code: body?.error?.code, retryAfter: res.headers.get('retry-after'), id: body?.id };
}

describe('a promoted standby among the servers of DATABASE_URL', () => {
  it('primary SIGKILLed, standby promoted: every answer meanwhile a 202 or a catalogued 503 within its bounds, writes again within 2 s of the promotion, every 202 kept, the session kept, an event stream opened before it gets the outcome written after', async () => {
    const database = () => panel.app.panelStatus.database;
    await waitFor(() => database().server !== null);
    expect(database()).toMatchObject({ server: `127.0.0.1:${pair.primary.port}`, timeline: 1 });
    const sessionId = panel.app.agentSide.registry.get((await panel.prisma.node.findFirstOrThrow()).id)!.id;

    const answers: Answer[] = [];
    let running = true;
    const loop = (async () => {
      while (running) {
        answers.push(await deploy());
        await new Promise((r) => setTimeout(r, 40));
      }
    })();
    await waitFor(() => answers.filter((a) => a.status === 202).length >= 5);
    // An event stream open across the switch: its deployment's outcome is written after it.
    const watched = answers.find((a) => a.status === 202)!.id!;
    const stream = await openTextStream(`${panel.url}/v1/deployments/${watched}/events`, { headers: { authorization: `Bearer ${panel.operatorToken}` } });
    expect(stream.status).toBe(200);
    await pair.primary.kill();
    await pair.standby.promote();
    const promotedAt = performance.now();
    await waitFor(() => answers.some((a) => a.at > promotedAt && a.status === 202), { timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 500));
    running = false;
    await loop;
    // LISTEN reconnected to the new primary and rescanned: the outcome reaches the stream opened before the switch.
    agent.send({ type: 'deploy.result', id: 'a-failover-1', deploymentId: watched, status: 'running', reason: 'healthy after the switch', code: null });
    await waitFor(() => stream.text.includes('"running"'), { timeoutMs: 5_000 });
    stream.close();

    const firstAfter = answers.find((a) => a.at > promotedAt && a.status === 202)!;
    expect(firstAfter.at - promotedAt).toBeLessThan(RESUME_MS);
    // Every answer is a 202 or a catalogued 503 with Retry-After: nothing else, never a 500.
    for (const a of answers) {
      if (a.status === 202) continue;
      expect(a.status).toBe(503);
      expect(UNAVAILABLE).toContain(a.code);
      expect(a.retryAfter).toBe('5');
    }
    // None waited long: a deploy caught in the switch answers within its database bounds (a connect and the
    // statements of one deploy), whether it ends 503 or, reaching the promoted server in time, 202.
    expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(CONNECT_MS + 3 * QUERY_MS);
    // Synchronous standby: every deployment acknowledged before the kill is on the new primary.
    const kept = new Set((await pair.standby.query<{ id: string }>('SELECT id FROM deployments', 'tether')).map((r) => r.id));
    const acknowledged = answers.filter((a) => a.status === 202).map((a) => a.id!);
    expect(acknowledged.filter((id) => !kept.has(id))).toEqual([]);
    // The panel follows the new primary on its new timeline; the agent's session was never torn down.
    expect(database()).toMatchObject({ server: `127.0.0.1:${pair.standby.port}`, timeline: 2, failovers: 1 });
    // Operators read the same at GET /v1/panel.
    expect((await panel.api('GET', '/v1/panel')).body.database).toMatchObject({ server: `127.0.0.1:${pair.standby.port}`, timeline: 2, failovers: 1 });
    expect(panel.app.agentSide.registry.get((await panel.prisma.node.findFirstOrThrow()).id)?.id).toBe(sessionId);
    const metrics = await (await fetch(`${panel.url}/metrics`)).text();
    expect(metrics).toContain(`tether_db_primary_timeline{server="127.0.0.1:${pair.standby.port}"} 2`);
    expect(metrics).toMatch(/^tether_db_failovers_total 1$/m);
  }, 60_000);

  it('the old primary back, writable, on its old timeline: never used again, by this panel or by a new one', async () => {
    await pair.primary.restart();
    const old = await pair.primary.query<{ recovery: boolean }>('SELECT pg_is_in_recovery() AS recovery');
    expect(old[0]!.recovery).toBe(false);
    // Every connection of the panel dropped: each reconnects, and must choose the promoted server again.
    await pair.standby.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'tether' AND pid <> pg_backend_pid()");
    let made: { status: number; body: { id?: string } } | undefined;
    await waitFor(async () => {
      made = await panel.api('POST', '/v1/teams', { name: `after-${Date.now()}` });
      return made.status === 201;
    }, { timeoutMs: 10_000 });
    const id = made!.body.id!;
    expect(await pair.standby.query(`SELECT id FROM teams WHERE id = '${id}'`, 'tether')).toHaveLength(1);
    expect(await pair.primary.query(`SELECT id FROM teams WHERE id = '${id}'`, 'tether')).toHaveLength(0);
    expect(panel.app.panelStatus.database).toMatchObject({ server: `127.0.0.1:${pair.standby.port}`, timeline: 2 });
    // A panel starting now, with no memory of timeline 2, probes both and takes the higher timeline.
    const fresh = PrimaryLocator.forUrl(pair.bothUrl('tether'), CONNECT_MS);
    expect(await fresh.target()).toMatchObject({ port: pair.standby.port });
    // One that knew timeline 2 and is offered only the old primary refuses it.
    const knowing = PrimaryLocator.forUrl(pair.bothUrl('tether'), CONNECT_MS);
    await knowing.target();
    expect(() => knowing.accept(fresh.hosts[0]!, { recovery: false, timeline: 1 })).toThrow(/older than timeline 2/);
    expect(knowing.staleRefused).toBe(1);
  }, 60_000);
});
