import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPostgres, waitFor, type TestPostgres } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';
import { RawConnection, upgradeRequest } from './helpers/raw-http.js';

// Who may hold the panel's edge before proving anything (issue 25). Agents and
// attackers come from different 127.0.0.x source addresses. An upgrade on any
// path but GET /v1/agent/connect is refused before the handshake and never
// counts toward TETHER_MAX_OPENING_SESSIONS (on the main this test was written
// against, 505 junk upgrades of /healthz were each answered 101 and the next
// agent got 503 NOT_READY for 30 s); one address holds at most
// TETHER_MAX_CONNECTIONS_PER_ADDRESS connections before authentication, and an
// agent session stops counting once welcomed.

const CAP = 700;
let pg: TestPostgres;
let panel: Panel;

beforeAll(async () => {
  pg = await startTestPostgres();
  panel = await startPanel({ pg, env: { TETHER_MAX_CONNECTIONS_PER_ADDRESS: String(CAP), TETHER_MAX_OPENING_SESSIONS: '500' } });
}, 60_000);
afterAll(async () => {
  await panel?.close();
  await pg?.stop();
});

const healthz = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';

describe('upgrades on other paths', () => {
  it('600 junk upgrades (healthz, teams, POST connect) are refused 400 UPGRADE_NOT_ALLOWED with no handshake; an agent then connects at once', async () => {
    const junkPaths = ['/healthz', '/v1/teams', '/dashboard/api/stream'];
    const junk = await Promise.all(Array.from({ length: 600 }, () => RawConnection.open(panel.port, '127.0.0.2')));
    junk.forEach((c, i) => c.write(upgradeRequest(junkPaths[i % junkPaths.length]!)));
    const answers = await Promise.all(junk.map((c) => c.answer()));
    expect(answers.every((a) => a?.status === 400)).toBe(true);
    expect(JSON.parse(answers[0]!.body)).toMatchObject({ error: { code: 'UPGRADE_NOT_ALLOWED' } });
    // Not an upgrade of the agent path either: a POST.
    const post = await RawConnection.open(panel.port, '127.0.0.2');
    post.write(upgradeRequest('/v1/agent/connect').replace('GET', 'POST'));
    expect((await post.answer())?.status).toBe(400);
    // The refused sockets are closed by the panel (the junk client never closes its end).
    await waitFor(() => junk.every((c) => c.closed), { timeoutMs: 3_000 });
    const node = await panel.createNode('edge-agent');
    const asked = performance.now();
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, localAddress: '127.0.0.3' });
    expect(performance.now() - asked).toBeLessThan(1_000);
    expect(agent.welcome.sessionId).toBeTruthy();
    const metrics = await (await fetch(`${panel.url}/metrics`)).text();
    expect(metrics).toMatch(/^tether_edge_refusals_total\{code="UPGRADE_NOT_ALLOWED"\} 601$/m);
    expect(metrics).toMatch(/^tether_agent_upgrades_refused_busy_total 0$/m);
    agent.close();
    post.close();
  });

  it('an agent upgrade without a token still gets its 401 (the gate lets the agent path through)', async () => {
    const c = await RawConnection.open(panel.port, '127.0.0.2');
    c.write(upgradeRequest('/v1/agent/connect?x=1'));
    expect((await c.answer())?.status).toBe(401);
    c.close();
  });
});

describe('connections per address', () => {
  it(`holds exactly ${CAP} unauthenticated connections from one address; the next is 429 TOO_MANY_CONNECTIONS; other addresses and a freed place are served`, async () => {
    // A welcomed agent from the same address does not count.
    const node = await panel.createNode('edge-nat-agent');
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, localAddress: '127.0.0.4' });
    await waitFor(() => panel.app.panelStatus.connectionsHeldBy('127.0.0.4') === 0);
    const held: RawConnection[] = [];
    for (let i = 0; i < CAP; i++) held.push(await RawConnection.open(panel.port, '127.0.0.4'));
    await waitFor(() => panel.app.panelStatus.connectionsHeldBy('127.0.0.4') === CAP);
    // The last place taken is a real one: it is answered.
    held[CAP - 1]!.write(healthz);
    expect((await held[CAP - 1]!.answer())?.status).toBe(200);
    const over = await RawConnection.open(panel.port, '127.0.0.4');
    over.write(healthz);
    const refused = await over.answer();
    expect(refused?.status).toBe(429);
    expect(JSON.parse(refused!.body)).toMatchObject({ error: { code: 'TOO_MANY_CONNECTIONS' } });
    expect(refused?.headers.connection).toBe('close');
    // An upgrade over the cap is refused the same way, before its token is looked at.
    const overUpgrade = await RawConnection.open(panel.port, '127.0.0.4');
    overUpgrade.write(upgradeRequest('/v1/agent/connect', node.token));
    expect((await overUpgrade.answer())?.status).toBe(429);
    // Another address is not affected.
    const other = await RawConnection.open(panel.port, '127.0.0.5');
    other.write(healthz);
    expect((await other.answer())?.status).toBe(200);
    // One place freed: the address is served again.
    held[0]!.close();
    await waitFor(() => panel.app.panelStatus.connectionsHeldBy('127.0.0.4') === CAP - 1);
    const again = await RawConnection.open(panel.port, '127.0.0.4');
    again.write(healthz);
    expect((await again.answer())?.status).toBe(200);
    expect(agent.closed).toBeNull();
    for (const c of [...held, over, overUpgrade, other, again]) c.close();
    agent.close();
  }, 30_000);
});
