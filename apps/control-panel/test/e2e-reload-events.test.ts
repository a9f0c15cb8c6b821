import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerApi, ensureCaddy, ensureDocker, sleep, startTestPostgres, waitFor, type TestPostgres } from '@tether/testkit';
import { startAgentProcess } from './helpers/agent-process.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { reloadsOf, sessionRow, startRoutedHost, type RoutedHost } from './helpers/routed-host.js';

// Every reload reaches the history once, whatever made it. Reproduced from
// the issue: with the agent's own proxy check every second, a restarted Caddy
// is repaired by the check (not by a push), and before proxy.events the
// panel's history never heard of that reload. A real panel, a real agent
// process, its Caddy container; read the way an operator reads it.

const ready = (await ensureDocker()).available && (await ensureCaddy()).available;
const tag = process.pid.toString(36);

let pg: TestPostgres;
let panel: Panel;
let host: RoutedHost;
const AGENT_ENV = { TETHER_PROXY_CHECK_INTERVAL_MS: '500', TETHER_MIN_READY_MS: '200', TETHER_DRAIN_MS: '200', TETHER_STOP_TIMEOUT_MS: '2000' };

beforeAll(async () => {
  if (!ready) return;
  pg = await startTestPostgres();
  // Pushes every 5 minutes, as in production: only the agent's own check can repair in time.
  panel = await startPanel({ pg, env: { TETHER_HEARTBEAT_INTERVAL_MS: '200', TETHER_RECONCILE_INTERVAL_MS: '300000' } });
  host = await startRoutedHost(panel, `ev-${tag}`, AGENT_ENV);
});

afterAll(async () => {
  await host?.agent.destroy();
  await panel?.close();
  await pg?.stop();
});

describe.skipIf(!ready)('reload history', () => {
  it('a Caddy restart repaired by the periodic check: one repair-empty reload, listed once, counted once', async () => {
    await waitFor(async () => (await reloadsOf(panel, host.nodeId)).length === 1, { timeoutMs: 10_000, message: 'the initial reload listed' });
    expect((await reloadsOf(panel, host.nodeId)).map((r) => r.kind)).toEqual(['initial']);
    const before = await sessionRow(panel, host.nodeId);

    expect((await dockerApi('POST', `/containers/tether-proxy-${host.nodeName}/restart?t=1`)).status).toBe(204);
    await waitFor(async () => (await reloadsOf(panel, host.nodeId)).length === 2, { timeoutMs: 10_000, message: 'the repair listed' });
    // Heartbeats, pushes and resends go on; nothing is listed twice.
    await sleep(2_000);
    const reloads = await reloadsOf(panel, host.nodeId);
    expect(reloads.map((r) => [r.kind, r.reason])).toEqual([
      ['repair-empty', 'repaired: proxy was running an empty config; static config loaded'],
      ['initial', 'static proxy config loaded (first configuration)'],
    ]);
    const after = await sessionRow(panel, host.nodeId);
    expect(after.reloads.total - before.reloads.total).toBe(1);
    // Not disruptive: the restart had dropped the connections already.
    expect(after.reloads.today).toBe(before.reloads.today);
    expect(after.reloads).toMatchObject({ kinds: { initial: 1, repairEmpty: 1, change: 0, repairDrift: 0 } });
  });

  it('an agent restart: counters kept, the repair after it listed once', async () => {
    const before = await reloadsOf(panel, host.nodeId);
    const row = await sessionRow(panel, host.nodeId);
    await host.agent.stop();
    // While the agent is away Caddy restarts; the restarted agent's first check repairs it.
    expect((await dockerApi('POST', `/containers/tether-proxy-${host.nodeName}/restart?t=1`)).status).toBe(204);
    // Same node, state folder and published port (another port would recreate Caddy: an `initial` load).
    const agent = await startAgentProcess({
      panelUrl: panel.url,
      token: host.token,
      nodeName: host.nodeName,
      runtime: 'docker',
      proxy: 'container',
      stateDir: host.agent.stateDir,
      env: { ...AGENT_ENV, TETHER_PROXY_HTTP_PORT: String(host.httpPort) },
    });
    host = { ...host, agent };
    await waitFor(async () => (await reloadsOf(panel, host.nodeId)).length === before.length + 1, { timeoutMs: 15_000, message: 'the repair after the restart listed' });
    await sleep(1_500);
    expect((await reloadsOf(panel, host.nodeId)).length).toBe(before.length + 1);
    expect((await sessionRow(panel, host.nodeId)).reloads).toMatchObject({ total: row.reloads.total + 1, kinds: { repairEmpty: 2 } });
  });
});
