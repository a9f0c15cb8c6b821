import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerApi, ensureCaddy, ensureDocker, freePort, sleep, startTestPostgres, waitFor, type TestPostgres } from '@tether/testkit';
import { ensureEchoImage } from './helpers/echo-image.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { attachRoute, containerHostname, createTeam, deploy, deployEchoService, getThroughProxy, reloadsOf, sessionRow, startRoutedHost, type RoutedHost } from './helpers/routed-host.js';

// The canary through the whole system: a real panel, a real agent process on
// this host running its Caddy container on its own Docker network, the
// canary's WebSocket going host → Caddy's container address on the network → Caddy
// → the agent's endpoint on the network's gateway address. Drops and reloads
// are read the way an operator reads them: GET /v1/nodes/:id/canary-drops,
// GET /v1/nodes/:id/reloads and GET /v1/sessions.

const ready = (await ensureDocker()).available && (await ensureCaddy()).available;
const tag = process.pid.toString(36);
const nodeName = `cn-${tag}`;
/** The network the agent-process helper names for this node; created here first to learn its gateway. */
const network = `tether-e2e-${nodeName}-${process.pid}`;

let pg: TestPostgres;
let panel: Panel;
let host: RoutedHost;
let image: string;

interface Drop {
  at: string;
  cause: string;
  reloadReason: string | null;
  closeCode: number | null;
  reconnectMs: number | null;
}

async function dropsOf(): Promise<Drop[]> {
  const res = await panel.api('GET', `/v1/nodes/${host.nodeId}/canary-drops?limit=1000`);
  if (res.status !== 200) throw new Error(`canary-drops: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.drops as Drop[];
}

const canaryOf = async () => (await sessionRow(panel, host.nodeId)) as unknown as { canary: { connected: boolean; dropsTotal: number } | null };

beforeAll(async () => {
  if (!ready) return;
  pg = await startTestPostgres();
  image = await ensureEchoImage();
  const created = await dockerApi('POST', '/networks/create', JSON.stringify({ Name: network, Driver: 'bridge', Labels: { 'tether.managed': 'true' } }));
  if (created.status !== 201) throw new Error(`network: ${created.status} ${JSON.stringify(created.body)}`);
  const inspected = await dockerApi('GET', `/networks/${network}`);
  const gateway = (JSON.parse(inspected.body) as { IPAM: { Config: Array<{ Gateway: string }> } }).IPAM.Config[0]!.Gateway;
  const endpointPort = await freePort();
  panel = await startPanel({ pg, env: { TETHER_HEARTBEAT_INTERVAL_MS: '200', TETHER_ROUTING_DEBOUNCE_MS: '100' } });
  host = await startRoutedHost(panel, nodeName, {
    TETHER_PROXY_CHECK_INTERVAL_MS: '500',
    TETHER_CANARY_INTERVAL_MS: '200',
    // The agent runs on the host: its endpoint listens on the network's gateway, which Caddy's container reaches.
    TETHER_CANARY_LISTEN: `${gateway}:${endpointPort}`,
    TETHER_CANARY_PROXY_PORT: String(await freePort()),
  });
  await waitFor(async () => (await canaryOf()).canary?.connected === true, { timeoutMs: 20_000, message: `canary connected\n${host.agent.process.output().slice(-2000)}` });
}, 120_000);

afterAll(async () => {
  await host?.agent.destroy();
  await dockerApi('DELETE', `/networks/${network}`).catch(() => undefined);
  await panel?.close();
  await pg?.stop();
});

describe.skipIf(!ready)('canary through the agent\'s own Caddy container', () => {
  let serviceId: string;
  const domain = `app.${tag}.canary-e2e.test`;

  it('a routing change (a domain attached): no reload, no drop (the static proxy)', async () => {
    const team = await createTeam(panel);
    const service = await deployEchoService(panel, host, team, image, 'app');
    serviceId = service.serviceId;
    const before = (await dropsOf()).length;
    const reloads = (await reloadsOf(panel, host.nodeId)).length;
    await attachRoute(panel, serviceId, domain);
    await waitFor(async () => (await getThroughProxy(host, domain)).body === (await containerHostname(service.deploymentId)), { timeoutMs: 15_000, message: 'routed' });
    await sleep(1_500);
    expect(await dropsOf()).toHaveLength(before);
    expect(await reloadsOf(panel, host.nodeId)).toHaveLength(reloads);
    expect((await canaryOf()).canary).toMatchObject({ connected: true });
  });

  it('redeploying the routed service: zero canary drops, zero reloads', async () => {
    const drops = (await dropsOf()).length;
    const reloads = (await reloadsOf(panel, host.nodeId)).length;
    const deploymentId = await deploy(panel, serviceId);
    await waitFor(async () => (await getThroughProxy(host, domain)).body === (await containerHostname(deploymentId)), { timeoutMs: 20_000, message: 'new container serves' });
    await sleep(1_500);
    expect((await dropsOf()).length).toBe(drops);
    expect((await reloadsOf(panel, host.nodeId)).length).toBe(reloads);
    expect((await canaryOf()).canary).toMatchObject({ connected: true });
  });

  it('Caddy killed and brought back: one repair-empty reload and one drop attributed to the restart, each listed once', async () => {
    const drops = (await dropsOf()).length;
    const reloads = (await reloadsOf(panel, host.nodeId)).length;
    expect((await dockerApi('POST', `/containers/tether-proxy-${nodeName}/kill`)).status).toBe(204);
    await waitFor(async () => (await dropsOf()).length === drops + 1, { timeoutMs: 20_000, message: 'the drop listed' });
    await sleep(2_000);
    const reloadList = await reloadsOf(panel, host.nodeId);
    expect(reloadList.length).toBe(reloads + 1);
    expect(reloadList[0]).toMatchObject({ kind: 'repair-empty', reason: 'repaired: proxy was running an empty config; static config loaded' });
    const dropList = await dropsOf();
    expect(dropList).toHaveLength(drops + 1);
    expect(dropList[0]).toMatchObject({ cause: 'proxy-restarted', reloadReason: null });
    expect((await canaryOf()).canary).toMatchObject({ connected: true });
  });
});
