import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureCaddy, ensureDocker, ensureKnot, freePort, sleep, spawnProcess, startCaddy, waitFor, type ManagedProcess, type TestCaddy } from '@tether/testkit';
import { CAPABILITIES, DEFAULT_TIMING, routingHash, serviceUpstream, type AgentMessage, type DeployDrained, type Hello, type Route, type Workload } from '@tether/protocol';
import { KnotAnswerer } from '../../src/proxy/index.js';
import { FakePanel, type PanelConn } from '../connection/fake-panel.js';
import { removeTempDirs, silentLogger, tempDir } from '../proxy/helpers/harness.js';
import { getWithMarker } from '../proxy/helpers/static-harness.js';
import { connectThroughProxy } from '../proxy/helpers/ws-echo.js';
import { useHarness } from './support/harness.js';
import { ensureWsImage } from './support/ws-image.js';

/** What this panel confirms: everything the agent names but workload.allocations (this file drives deploys, which such a session refuses). */
const deployCapabilities = (named: string[] | undefined) => (named ?? []).filter((c) => c !== CAPABILITIES.WORKLOAD_ALLOCATIONS);

// The drain survives the agent: the real agent process (dist/main.js, static
// proxy, real Docker, Caddy and knotd) is SIGKILLed 2 s into an 8 s drain and
// started again. The old container keeps its WebSocket, is stopped at its
// deadline (not before: the restarted agent's first `workloads` set must not
// remove it early) and the panel gets deploy.drained on the new session.

const ready = (await ensureDocker()).available && (await ensureCaddy()).available && (await ensureKnot()).available;
const main = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'main.js');
const serviceId = 'svc_restart';
const domain = 'restart.example.test';

describe.skipIf(!ready)('drain across an agent restart', () => {
  const h = useHarness('drain-restart');
  let caddy: TestCaddy;
  let panel: FakePanel;
  let stateDir: string;
  let env: NodeJS.ProcessEnv;
  let agent: ManagedProcess | null = null;
  let image: string;

  beforeAll(async () => {
    caddy = await startCaddy();
    image = await ensureWsImage();
    panel = new FakePanel();
    panel.autoWelcome = null;
    const panelUrl = await panel.start();
    stateDir = await tempDir();
    env = {
      TETHER_PANEL_URL: panelUrl,
      TETHER_NODE_TOKEN: 'tth_node_test_token_0123456789',
      TETHER_NODE_NAME: h.node,
      TETHER_DOCKER_NETWORK: h.network,
      TETHER_STATE_DIR: stateDir,
      TETHER_LOG_FORMAT: 'json',
      TETHER_LOG_LEVEL: 'info',
      TETHER_RECONNECT_MIN_MS: '100',
      TETHER_RECONNECT_MAX_MS: '500',
      TETHER_MIN_READY_MS: '300',
      TETHER_STOP_TIMEOUT_MS: '2000',
      TETHER_PROXY: 'external',
      TETHER_PROXY_TLS: 'off',
      TETHER_CADDY_ADMIN_URL: caddy.adminUrl,
      TETHER_PROXY_HTTP_PORT: String(caddy.httpPort),
      TETHER_PROXY_ANSWERER_LISTEN: `127.0.0.1:${await freePort()}`,
      TETHER_PROXY_ASK_PORT: String(await freePort()),
      TETHER_PROXY_ANSWERER_CHECK_MS: '250',
      TETHER_PROXY_LOOKUP_REFRESH_MS: '500',
      TETHER_CANARY_INTERVAL_MS: '0',
    };
  }, 120_000);

  afterAll(async () => {
    await agent?.stop(2_000);
    await new KnotAnswerer({ dir: path.join(stateDir, 'answerer'), listen: { host: '127.0.0.1', port: 1 }, knotd: 'knotd', knotc: 'knotc', probeTimeoutMs: 300, logger: silentLogger }).destroy();
    await panel?.stop();
    await caddy?.stop();
    await removeTempDirs();
  });

  const startAgent = () => (agent = spawnProcess(process.execPath, [main], { env }));
  /** The n-th session: welcome confirming what the agent announced (workload.drain among it). */
  async function session(n: number): Promise<{ conn: PanelConn; hello: Hello }> {
    const conn = await panel.waitForConnection(n, 20_000);
    const hello = await conn.waitFor<Hello>((m) => m.type === 'hello', 20_000);
    conn.send({ type: 'welcome', id: `w${n}`, ref: hello.id, sessionId: `ses_${n}`, nodeId: 'node_1', timing: DEFAULT_TIMING, capabilities: deployCapabilities(hello.capabilities) });
    return { conn, hello };
  }
  const routes: Route[] = [{ domain, pathPrefix: null, serviceId, upstream: serviceUpstream(serviceId, 8080) }];
  const pushMap = (conn: PanelConn) => conn.send({ type: 'routing.map', id: `m${Date.now()}`, version: 1, hash: routingHash(routes), routes });
  const workload = (version: string): Workload => h.workload(serviceId, `dep_${version}`, { image, env: { MESSAGE: version }, drainSeconds: 8 });
  const running = (deploymentId: string) => (m: AgentMessage) => m.type === 'deploy.result' && m.deploymentId === deploymentId && m.status === 'running';
  const drained = (deploymentId: string) => (m: AgentMessage) => m.type === 'deploy.drained' && m.deploymentId === deploymentId;
  const stateOf = (id: string) => h.docker.getContainer(id).inspect().then((i) => i.State.Status, () => 'gone');

  it('SIGKILLed 2 s into an 8 s drain and restarted: the old container stops at its deadline, and deploy.drained arrives', async () => {
    startAgent();
    const first = await session(1);
    expect(first.hello.capabilities).toContain(CAPABILITIES.WORKLOAD_DRAIN);
    pushMap(first.conn);
    first.conn.send({ type: 'deploy', id: 'd1', workload: workload('v1') });
    await first.conn.waitFor(running('dep_v1'), 30_000);
    await waitFor(async () => (await getWithMarker(caddy.httpPort, domain)).body.trim() === 'v1', { timeoutMs: 10_000, message: 'v1 through Caddy' });
    const held = await connectThroughProxy(caddy.httpPort, domain);
    expect(await held.echo('a')).toBe('v1:a');
    const heldClosed = held.closed.then(() => performance.now());
    const old = (await h.containers()).map((c) => c.id);

    first.conn.send({ type: 'deploy', id: 'd2', workload: workload('v2') });
    await first.conn.waitFor(running('dep_v2'), 30_000);
    const switchAt = performance.now();
    await sleep(2_000);
    process.kill(agent!.pid, 'SIGKILL');
    await agent!.exited();
    await sleep(1_000);
    startAgent();
    const second = await session(2);
    expect(second.hello.capabilities).toContain(CAPABILITIES.WORKLOAD_DRAIN);
    // What a panel sends a node that joins: its complete set (v2 desired: v1's container is not desired) and the map.
    second.conn.send({ type: 'workloads', id: 'ws2', workloads: [workload('v2')] });
    pushMap(second.conn);

    await sleep(Math.max(0, switchAt + 7_000 - performance.now()));
    expect(await stateOf(old[0]!)).toBe('running');
    expect(held.open).toBe(true);
    expect(await held.echo('b')).toBe('v1:b');
    expect((await getWithMarker(caddy.httpPort, domain)).body.trim()).toBe('v2');
    await waitFor(async () => (await stateOf(old[0]!)) === 'gone', { timeoutMs: 10_000, intervalMs: 50, message: 'old container removed' });
    const goneMs = performance.now() - switchAt;
    const closedMs = (await heldClosed) - switchAt;
    const report = await second.conn.waitFor<DeployDrained>(drained('dep_v2'), 10_000);
    console.log(`agent killed 2 s into the drain: old WebSocket closed ${closedMs.toFixed(0)} ms, container gone ${goneMs.toFixed(0)} ms after the switch (deadline 8000); ${JSON.stringify(report)}`);
    expect(closedMs).toBeGreaterThanOrEqual(7_500);
    expect(goneMs).toBeLessThan(10_000);
    expect(report).toMatchObject({ connectionsOpenAtSwitch: 1, connectionsCut: 1 });
    expect(first.conn.received.some(drained('dep_v2'))).toBe(false);
  }, 120_000);
});
