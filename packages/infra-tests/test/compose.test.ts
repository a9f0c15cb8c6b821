import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import { ensureWebImage, waitFor } from '@tether/testkit';
import WebSocket from 'ws';
import { ComposeStack } from './fixtures/compose.js';
import { docker, dockerLogs, testImages } from './fixtures/images.js';
import { ensureInfraTools } from './fixtures/tools.js';
import { ensureWsImage } from './fixtures/ws-image.js';

// The shipped infra/compose/docker-compose.yml run by Debian's docker-compose
// 1.29 on locally built images (PostgreSQL from Debian's package): the first
// start with its node-token step (as docs/install.md tells it), a service
// deployed and routed through the REST API and reached through the agent's
// Caddy, a panel restart and a down/up with volumes kept (nothing lost, the
// container adopted, no proxy reload), and `docker stop` of each container.
// The stack runs the static proxy with no setting of its own: the agent
// image carries the answerer tree (docs/install.md, step 1) and builds the
// answerer's image from it; routes are answers, the Caddy config never changes:
// a customer's WebSocket stays open while another service's routes and
// releases churn (the second seed incident, issue 34).

const tools = await ensureInfraTools({ compose: true });
const DOMAIN = 'app.compose.localhost';
/** The agent's default TETHER_RECONNECT_MAX_MS: a rejoin takes at most one backoff step after the panel is back. */
const RECONNECT_MAX_MS = 30_000;

interface SessionRow {
  nodeName: string;
  state: string;
  sessionId: string | null;
  routing: { desiredHash: string | null; appliedHash: string | null };
  reloads: { today: number; total: number };
  canary: { connected: boolean; dropsTotal: number } | null;
}

let stack: ComposeStack;
const ids = { team: '', node: '', service: '', route: '', deployment: '', container: '' };
let nodeToken = '';

function throughProxy(host = DOMAIN): Promise<{ status: number; body: string; marker: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: stack.proxyPort, path: '/', headers: { host }, timeout: 3_000 }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, marker: res.headers['x-tether-proxy'] as string | undefined }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

async function session(): Promise<SessionRow | undefined> {
  const res = await stack.api<{ sessions: SessionRow[] }>('GET', '/v1/sessions');
  return res.body?.sessions?.find((s) => s.nodeName === stack.nodeName);
}

async function connectedSession(timeoutMs: number, notId?: string): Promise<SessionRow> {
  return waitFor(
    async () => {
      const s = await session().catch(() => undefined);
      return s?.state === 'connected' && s.sessionId && s.sessionId !== notId && s.routing.appliedHash === s.routing.desiredHash ? s : undefined;
    },
    { timeoutMs, intervalMs: 100 },
  );
}

async function serviceContainer(): Promise<string> {
  const status = await waitFor(
    async () => {
      const s = (await stack.api('GET', `/v1/services/${ids.service}/status`).catch(() => undefined))?.body;
      return s?.state === 'running' && s.containers?.length === 1 ? s : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  return status.containers[0]!.containerId;
}

/** This stack's containers the agent made with `role` (proxy, answerer). */
async function agentContainers(role: string): Promise<string[]> {
  return (await docker(['ps', '-q', '--filter', `label=tether.node=${stack.nodeName}`, '--filter', `label=tether.role=${role}`])).split('\n').filter(Boolean);
}

async function panelReady(timeoutMs: number): Promise<void> {
  await waitFor(async () => (await fetch(`${stack.panelUrl}/readyz`).catch(() => undefined))?.status === 200, { timeoutMs, intervalMs: 100 });
}

describe.skipIf(!tools.available)('the shipped compose stack (docker-compose 1.29)', () => {
  beforeAll(async () => {
    stack = new ComposeStack(await testImages());
    await stack.prepare();
  }, 900_000);

  afterAll(async () => {
    await stack?.destroy();
  }, 60_000);

  it('first start without a node token, then with TETHER_PROXY_ROUTING=config left in .env: the agent exits 2 naming each and compose restarts it; without them it joins', async () => {
    // `up -d` of everything before step 3 of docs/install.md (the guide starts postgres and panel first).
    await stack.compose(['up', '-d'], 180_000);
    await panelReady(60_000);
    // The panel's accept queue: the stack raises the kernel's cap in the panel's network namespace (docs/operations.md, "Large fleets").
    expect(await docker(['exec', await stack.containerId('panel'), 'cat', '/proc/sys/net/core/somaxconn'])).toBe('65535');
    const waiting = await stack.containerId('agent');
    // Between two of compose's restarts the container shows the last exit: code 2, and restarted at least once.
    await waitFor(async () => /^[1-9]\d* 2$/.test(await docker(['inspect', '-f', '{{.RestartCount}} {{.State.ExitCode}}', waiting])), { timeoutMs: 30_000, intervalMs: 50 });
    expect(await dockerLogs(waiting)).toMatch(/TETHER_NODE_TOKEN: required/);
    const node = await stack.api('POST', '/v1/nodes', { name: stack.nodeName });
    expect(node.status).toBe(201);
    expect(node.body.token).toMatch(/^tth_node_/);
    ids.node = node.body.id;
    nodeToken = node.body.token;
    stack.env.TETHER_NODE_TOKEN = nodeToken;
    // An .env an older install guide wrote: the per-route mode is gone, refused at start with the line that says so,
    // before the agent touches Caddy (nothing of this node's runs yet).
    stack.env.TETHER_PROXY_ROUTING = 'config';
    await stack.writeEnv();
    await stack.compose(['up', '-d', 'agent'], 120_000);
    const refused = await stack.containerId('agent');
    expect(refused).not.toBe(waiting);
    await waitFor(async () => /^[1-9]\d* 2$/.test(await docker(['inspect', '-f', '{{.RestartCount}} {{.State.ExitCode}}', refused])), { timeoutMs: 30_000, intervalMs: 50 });
    expect(await dockerLogs(refused)).toMatch(/TETHER_PROXY_ROUTING=config: the per-route config mode is gone.*remove TETHER_PROXY_ROUTING/);
    expect(await agentContainers('proxy')).toEqual([]);
    delete stack.env.TETHER_PROXY_ROUTING;
    await stack.writeEnv();
    await stack.compose(['up', '-d', 'agent'], 120_000);
    // The changed env file recreates the agent's container.
    expect(await stack.containerId('agent')).not.toBe(refused);
    const s = await connectedSession(60_000);
    expect(s.sessionId).toBeTruthy();
    // The agent container's health check reads its health file: healthy once the session is up.
    const agent = await stack.containerId('agent');
    await waitFor(async () => (await docker(['inspect', '-f', '{{.State.Health.Status}}', agent])) === 'healthy', { timeoutMs: 60_000, intervalMs: 500 });
    // The canary goes through the agent's own Caddy to the agent, by its alias on Tether's network.
    const canary = await waitFor(async () => ((await session())?.canary?.connected ? (await session())?.canary : undefined), { timeoutMs: 60_000, intervalMs: 250 });
    expect(canary?.dropsTotal).toBe(0);
  }, 300_000);

  it('team, service, route and deployment through the REST API; the service answers through the agent\'s Caddy', async () => {
    const image = await ensureWebImage();
    const team = await stack.api('POST', '/v1/teams', { name: 'compose' });
    expect(team.status).toBe(201);
    ids.team = team.body.id;
    const service = await stack.api('POST', '/v1/services', { teamId: ids.team, name: 'web', image, internalPort: 8080, replicas: 1, node: stack.nodeName, env: { MESSAGE: 'hello from compose' } });
    expect(service.status).toBe(201);
    ids.service = service.body.id;
    const route = await stack.api('POST', '/v1/routes', { domain: DOMAIN, serviceId: ids.service });
    expect(route.status).toBe(201);
    ids.route = route.body.id;
    const deployment = await stack.api('POST', `/v1/services/${ids.service}/deployments`, {});
    // The installed panel runs services on agents of this release through allocations (TETHER_ALLOCATIONS=on, the
    // default): a deployment is recorded and handed to the scheduler, 201 pending, never a 202 delivered.
    expect([deployment.status, deployment.body.status]).toEqual([201, 'pending']);
    ids.deployment = deployment.body.id;
    const done = await waitFor(
      async () => {
        const d = (await stack.api('GET', `/v1/deployments/${ids.deployment}`)).body;
        return d && !['pending', 'delivered'].includes(d.status) ? d : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    expect(done.status).toBe('running');
    ids.container = await serviceContainer();
    const answer = await waitFor(async () => ((await throughProxy().catch(() => undefined))?.status === 200 ? throughProxy() : undefined), { timeoutMs: 30_000, intervalMs: 200 });
    expect(answer.body.trim()).toBe('hello from compose');
    expect(answer.marker).toBeUndefined();
    // Static routing: Caddy's own answer for a name with no route, and the answerer the agent built from its own tree.
    const unknown = await throughProxy(`nothing.${DOMAIN}`);
    expect([unknown.status, unknown.marker]).toEqual([404, 'no-route']);
    const answerer = await agentContainers('answerer');
    expect(answerer).toHaveLength(1);
    expect(await docker(['inspect', '-f', '{{.Config.Image}} {{.State.Status}}', answerer[0]!])).toMatch(/^tether\/answerer:[0-9a-f]{16} running$/);
    const s = await connectedSession(30_000);
    expect(s.reloads.total).toBeGreaterThanOrEqual(1);
    expect(s.routing.appliedHash).toBe(s.routing.desiredHash);
  }, 180_000);

  it("a WebSocket to one service keeps every echo in order while another gets 20 routes attached, 10 detached and two redeploys; Caddy loads nothing", async () => {
    const deployed = async (serviceId: string) => {
      const created = await stack.api('POST', `/v1/services/${serviceId}/deployments`, {});
      expect([created.status, created.body.status]).toEqual([201, 'pending']);
      const done = await waitFor(
        async () => {
          const d = (await stack.api('GET', `/v1/deployments/${created.body.id}`)).body;
          return d && !['pending', 'delivered'].includes(d.status) ? d : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      expect(done.status, JSON.stringify(done)).toBe('running');
    };
    const make = async (name: string, image: string, message: string) => {
      const res = await stack.api('POST', '/v1/services', { teamId: ids.team, name, image, internalPort: 8080, replicas: 1, node: stack.nodeName, env: { MESSAGE: message } });
      expect(res.status).toBe(201);
      return res.body.id as string;
    };
    const wsDomain = `ws.${DOMAIN}`;
    const chat = await make('chat', await ensureWsImage(), 'chat');
    expect((await stack.api('POST', '/v1/routes', { domain: wsDomain, serviceId: chat })).status).toBe(201);
    await deployed(chat);
    const churn = await make('churn', await ensureWebImage(), 'churn');
    await deployed(churn);
    await waitFor(async () => ((await throughProxy(wsDomain).catch(() => undefined))?.body.trim() === 'chat' ? true : undefined), { timeoutMs: 30_000, intervalMs: 200 });
    const before = await connectedSession(30_000);

    const socket = new WebSocket(`ws://127.0.0.1:${stack.proxyPort}/`, { headers: { host: wsDomain } });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    const echoes: string[] = [];
    let closed: string | undefined;
    socket.on('message', (data) => echoes.push(data.toString()));
    socket.on('close', (code, reason) => (closed = `${code} ${reason.toString()}`));
    let sent = 0;
    const pinger = setInterval(() => {
      if (socket.readyState === WebSocket.OPEN) socket.send(String(++sent));
    }, 50);

    try {
      const routes: string[] = [];
      for (let i = 0; i < 20; i++) {
        const res = await stack.api('POST', '/v1/routes', { domain: `r${i}.churn.compose.localhost`, serviceId: churn });
        expect(res.status).toBe(201);
        routes.push(res.body.id);
      }
      for (const id of routes.slice(0, 10)) expect((await stack.api('DELETE', `/v1/routes/${id}`)).status).toBe(204);
      await deployed(churn);
      await deployed(churn);
      // Every change applied on the node (the map it runs is the one the panel wants) while the socket was open.
      const after = await connectedSession(30_000);
      expect((await throughProxy('r15.churn.compose.localhost')).body.trim()).toBe('churn');
      expect((await throughProxy('r5.churn.compose.localhost')).marker).toBe('no-route');
      expect(after.sessionId).toBe(before.sessionId);
      expect(after.reloads.total).toBe(before.reloads.total);
    } finally {
      clearInterval(pinger);
    }
    await waitFor(() => (echoes.length === sent ? true : undefined), { timeoutMs: 5_000, intervalMs: 20 }).catch(() => undefined);
    console.info(`WebSocket through the churn: ${sent} messages, ${echoes.length} echoes, closed: ${closed ?? 'no'}`);
    expect(closed).toBeUndefined();
    expect(sent).toBeGreaterThan(20);
    expect(echoes).toEqual(Array.from({ length: sent }, (_, i) => `chat:${i + 1}`));
    socket.close();
  }, 240_000);

  it('docker-compose restart panel: the agent rejoins within its backoff, nothing lost, no Caddy reload', async () => {
    const before = await connectedSession(10_000);
    await stack.compose(['restart', '-t', '10', 'panel'], 60_000);
    await panelReady(30_000);
    const back = Date.now();
    const after = await connectedSession(RECONNECT_MAX_MS + 5_000, before.sessionId ?? undefined);
    const rejoinMs = Date.now() - back;
    console.info(`agent rejoined ${rejoinMs} ms after the restarted panel was ready`);
    expect(rejoinMs).toBeLessThan(RECONNECT_MAX_MS);
    expect(after.sessionId).not.toBe(before.sessionId);
    expect(after.reloads.total).toBe(before.reloads.total);
    expect((await stack.api('GET', `/v1/deployments/${ids.deployment}`)).body.status).toBe('running');
    expect((await stack.api('GET', `/v1/routes/${ids.route}`)).status).toBe(200);
    expect(await serviceContainer()).toBe(ids.container);
    expect((await throughProxy()).body.trim()).toBe('hello from compose');
  }, 120_000);

  it('down, then up with the volumes kept: data and tokens kept, the container adopted, no Caddy reload', async () => {
    const before = await connectedSession(10_000);
    await stack.compose(['down', '--timeout', '10'], 120_000);
    // compose does not own what the agent made: the service and its proxy kept serving.
    expect((await throughProxy()).body.trim()).toBe('hello from compose');
    await stack.compose(['up', '-d'], 180_000);
    await panelReady(60_000);
    // The operator token and the node token (the agent's, from the env file) still work: both live in the kept database.
    const after = await connectedSession(60_000, before.sessionId ?? undefined);
    expect(after.reloads.total).toBe(before.reloads.total);
    expect((await stack.api('GET', `/v1/teams/${ids.team}`)).status).toBe(200);
    expect((await stack.api('GET', `/v1/deployments/${ids.deployment}`)).body.status).toBe('running');
    expect(await serviceContainer()).toBe(ids.container);
    expect((await throughProxy()).body.trim()).toBe('hello from compose');
  }, 300_000);

  it('docker stop of each container exits 0 within 10 s; PostgreSQL shuts down cleanly', async () => {
    const proxy = await agentContainers('proxy');
    expect(proxy).toHaveLength(1);
    const answerer = await agentContainers('answerer');
    expect(answerer).toHaveLength(1);
    const containers: Array<[string, string]> = [
      ['agent', await stack.containerId('agent')],
      ['panel', await stack.containerId('panel')],
      ['postgres', await stack.containerId('postgres')],
      ['service', ids.container],
      ['answerer', answerer[0]!],
      ['proxy', proxy[0]!],
    ];
    for (const [name, id] of containers) {
      expect(id, name).toMatch(/^[0-9a-f]{12,}$/);
      const started = Date.now();
      await docker(['stop', '-t', '10', id], 30_000);
      const ms = Date.now() - started;
      console.info(`docker stop ${name}: ${ms} ms`);
      // On its own signal handling, not by the SIGKILL at the end of the grace.
      expect(ms, name).toBeLessThan(9_000);
      expect(await docker(['inspect', '-f', '{{.State.ExitCode}}', id]), name).toBe('0');
    }
    // A fast shutdown to its end (no orphaned server, nothing to recover at the next start), and the panel ran no PostgreSQL of its own.
    const byName = new Map(containers);
    expect(await dockerLogs(byName.get('postgres')!)).toMatch(/database system is shut down/);
    expect(await dockerLogs(byName.get('panel')!)).not.toMatch(/Embedded PostgreSQL/);
  }, 120_000);
});
