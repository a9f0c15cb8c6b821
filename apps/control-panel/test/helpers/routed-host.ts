import http from 'node:http';
import { WebSocket } from 'ws';
import { dockerApi, waitFor } from '@tether/testkit';
import { startAgentProcess, type AgentProcess } from './agent-process.js';
import { ECHO_PORT } from './echo-image.js';
import type { Panel } from './panel-harness.js';
import { allocationsOn } from './deploy-answer.js';

// One app host for end-to-end routing tests: a real agent process running
// service containers and its own Caddy container (on its own Docker network,
// HTTP published on loopback), connected to a real panel; plus the ways a
// test looks at it from outside: the panel's REST API, Caddy's HTTP port and
// the Docker engine.

export interface RoutedHost {
  nodeId: string;
  nodeName: string;
  /** The node token (an agent restart on the same node uses it). */
  token: string;
  agent: AgentProcess;
  /** Caddy's HTTP port on 127.0.0.1. */
  httpPort: number;
}

/** The row of GET /v1/sessions for a node: what a dashboard sees. */
export interface SessionRow {
  state: string;
  routing: { desiredHash: string | null; appliedHash: string | null; drifting: boolean };
  reloads: { today: number; total: number; lastAt: string | null; lastReason: string | null; kinds: Record<string, number> | null };
}

export interface ReloadRecord {
  at: string;
  kind: string;
  hashBefore: string | null;
  hashAfter: string;
  reason: string;
}

/** Starts the agent and waits until its session is open and its first routing map is in place. */
export async function startRoutedHost(panel: Panel, nodeName: string, env: Record<string, string> = {}): Promise<RoutedHost> {
  const node = await panel.createNode(nodeName);
  const agent = await startAgentProcess({
    panelUrl: panel.url,
    token: node.token,
    nodeName,
    runtime: 'docker',
    proxy: 'container',
    // Short readiness and drain so a redeploy takes a second, not several.
    env: { TETHER_MIN_READY_MS: '200', TETHER_DRAIN_MS: '200', TETHER_STOP_TIMEOUT_MS: '2000', ...env },
  });
  const host: RoutedHost = { nodeId: node.id, nodeName, token: node.token, agent, httpPort: agent.httpPort as number };
  try {
    await waitFor(async () => routingSettled(await sessionRow(panel, host.nodeId)), {
      timeoutMs: 60_000,
      message: `${nodeName}: session open and first routing map applied`,
    });
  } catch (error) {
    throw new Error(`${(error as Error).message}\nagent output:\n${agent.process.output().slice(-3000)}`);
  }
  return host;
}

export async function sessionRow(panel: Panel, nodeId: string): Promise<SessionRow> {
  const res = await panel.api('GET', '/v1/sessions');
  const row = (res.body.sessions as Array<SessionRow & { nodeId: string }>).find((r) => r.nodeId === nodeId);
  if (!row) throw new Error(`no session row for ${nodeId}`);
  return row;
}

/** Connected, with the map the panel wants in place on the host. */
export const routingSettled = (row: SessionRow) =>
  row.state === 'connected' && row.routing.desiredHash !== null && row.routing.appliedHash === row.routing.desiredHash && !row.routing.drifting;

export async function reloadsOf(panel: Panel, nodeId: string): Promise<ReloadRecord[]> {
  const res = await panel.api('GET', `/v1/nodes/${nodeId}/reloads?limit=1000`);
  if (res.status !== 200) throw refused(panel, `reloads of ${nodeId}`, res);
  return res.body.reloads as ReloadRecord[];
}

export async function createTeam(panel: Panel): Promise<string> {
  const res = await panel.api('POST', '/v1/teams', { name: `team-${process.pid}-${Math.round(Math.random() * 1e9)}` });
  if (res.status !== 201) throw refused(panel, `team`, res);
  return res.body.id as string;
}

/** POST /v1/services/:id/deployments, then waits until the agent reports the deployment running. */
export async function deploy(panel: Panel, serviceId: string): Promise<string> {
  const res = await panel.api('POST', `/v1/services/${serviceId}/deployments`);
  // 202 delivered, or 201 handed to the scheduler when the service is managed by allocations (helpers/deploy-answer.ts).
  if (res.status !== (allocationsOn(panel) ? 201 : 202)) throw refused(panel, `deploy`, res);
  const id = res.body.id as string;
  await waitFor(
    async () => {
      const d = await panel.api('GET', `/v1/deployments/${id}`);
      if (d.body.status === 'failed') throw new Error(`deployment failed: ${d.body.reason}`);
      return d.body.status === 'running';
    },
    { timeoutMs: 30_000, message: `deployment ${id} running` },
  );
  return id;
}

/** A service running the echo image on the host, deployed through the REST API. */
export async function deployEchoService(panel: Panel, host: RoutedHost, teamId: string, image: string, name: string) {
  const res = await panel.api('POST', '/v1/services', { name, image, internalPort: ECHO_PORT, node: host.nodeName, teamId });
  if (res.status !== 201) throw refused(panel, `service`, res);
  const serviceId = res.body.id as string;
  return { serviceId, deploymentId: await deploy(panel, serviceId) };
}

/** An unexpected answer, with the panel's last warnings (a 503's cause is in its log, not in the answer). */
function refused(panel: Panel, what: string, res: { status: number; body: unknown }): Error {
  return new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}\npanel warnings:\n${panel.recentLogs()}`);
}

export async function attachRoute(panel: Panel, serviceId: string, domain: string): Promise<void> {
  const res = await panel.api('POST', '/v1/routes', { domain, serviceId });
  if (res.status !== 201) throw refused(panel, `route ${domain}`, res);
}

/** GET through the host's Caddy with a Host header (fetch cannot set Host). */
export function getThroughProxy(host: RoutedHost, domain: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: host.httpPort, path: '/', headers: { host: domain }, agent: false }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: body.trim() }));
    });
    req.setTimeout(5_000, () => req.destroy(new Error(`GET ${domain} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/** The hostname (= short container id) of the one container a deployment runs, as the echo image answers it. */
export async function containerHostname(deploymentId: string): Promise<string> {
  const filters = encodeURIComponent(JSON.stringify({ label: [`tether.deployment=${deploymentId}`] }));
  const list = JSON.parse((await dockerApi('GET', `/containers/json?filters=${filters}`)).body) as Array<{ Id: string }>;
  if (list.length !== 1) throw new Error(`deployment ${deploymentId} runs ${list.length} containers`);
  return list[0]!.Id.slice(0, 12);
}

export async function containersOf(deploymentId: string): Promise<number> {
  const filters = encodeURIComponent(JSON.stringify({ label: [`tether.deployment=${deploymentId}`] }));
  return (JSON.parse((await dockerApi('GET', `/containers/json?all=1&filters=${filters}`)).body) as unknown[]).length;
}

/** A customer's long-lived WebSocket through the host's Caddy, with how (and whether) it ended. */
export interface HeldSocket {
  echo(text: string): Promise<string>;
  readonly open: boolean;
  /** Close code, once closed. */
  readonly closeCode: number | null;
  close(): void;
}

export async function holdWebSocket(host: RoutedHost, domain: string): Promise<HeldSocket> {
  const socket = new WebSocket(`ws://127.0.0.1:${host.httpPort}/`, { headers: { host: domain } });
  let closeCode: number | null = null;
  socket.on('close', (code) => (closeCode = code));
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    socket.once('error', reject);
  });
  return {
    get open() {
      return socket.readyState === WebSocket.OPEN;
    },
    get closeCode() {
      return closeCode;
    },
    close: () => socket.close(),
    echo(text) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no echo of "${text}" within 3 s (close code ${closeCode})`)), 3_000);
        socket.once('message', (data: Buffer) => {
          clearTimeout(timer);
          resolve(data.toString('utf8'));
        });
        socket.send(text);
      });
    },
  };
}
