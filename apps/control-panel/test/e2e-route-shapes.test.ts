import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { caddyLoadCount, ensureCaddy, ensureDocker, ensureKnot, startCaddy, startTestPostgres, waitFor, type TestCaddy, type TestPostgres } from '@tether/testkit';
import { externalStaticProxyEnv, startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { ensureEchoImage } from './helpers/echo-image.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { containerHostname, createTeam, deployEchoService, routingSettled, sessionRow, type RoutedHost } from './helpers/routed-host.js';

// Route shapes of issue 34 end to end: routes attached through POST /v1/routes
// (`/`, `/api/v1`, `/a_b-c`, `/api`) answer from their services' containers
// through a real Caddy and knotd (an agent process, external static mode):
// segment-wise (`/api` never takes `/apix`), the longest prefix winning,
// without case, and not one Caddy load after the first apply.

const ready = (await ensureDocker()).available && (await ensureCaddy()).available && (await ensureKnot()).available;
const tag = process.pid.toString(36);

let pg: TestPostgres;
let panel: Panel;
let caddy: TestCaddy;
let agent: AgentProcess;
let loads: number;
const hostnames = new Map<string, string>();
const services = new Map<string, string>();

function get(domain: string, urlPath: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: caddy.httpPort, path: urlPath, headers: { host: domain }, agent: false }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: body.trim() }));
    });
    req.setTimeout(5_000, () => req.destroy(new Error(`GET ${domain}${urlPath} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  if (!ready) return;
  pg = await startTestPostgres();
  const image = await ensureEchoImage();
  panel = await startPanel({ pg, env: { TETHER_ROUTING_DEBOUNCE_MS: '100' } });
  caddy = await startCaddy();
  const node = await panel.createNode(`shapes-${tag}`);
  agent = await startAgentProcess({
    panelUrl: panel.url,
    token: node.token,
    nodeName: node.name,
    runtime: 'docker',
    env: await externalStaticProxyEnv(caddy, { TETHER_PROXY_TLS: 'off' }),
  });
  const host: RoutedHost = { nodeId: node.id, nodeName: node.name, token: node.token, agent, httpPort: caddy.httpPort };
  await waitFor(async () => routingSettled(await sessionRow(panel, node.id)), { timeoutMs: 60_000, message: `session open and first map applied\n${agent.process.output().slice(-3000)}` });
  loads = await caddyLoadCount(caddy.adminUrl);
  const team = await createTeam(panel);
  for (const name of ['site', 'v1', 'abc', 'api']) {
    const { serviceId, deploymentId } = await deployEchoService(panel, host, team, image, name);
    services.set(name, serviceId);
    hostnames.set(name, await containerHostname(deploymentId));
  }
}, 240_000);

afterAll(async () => {
  await agent?.destroy();
  await caddy?.stop();
  await panel?.close();
  await pg?.stop();
});

describe.skipIf(!ready)('route shapes through the REST API, a real Caddy and knotd', () => {
  it('/, /api/v1, /a_b-c and /api answer from their services: segment-wise, longest prefix first, without case, no load', async () => {
    const domain = `shop.${tag}.shapes.test`;
    const attached: Array<[string, string, string | null]> = [
      ['site', '/', null],
      ['v1', '/api/v1', '/api/v1'],
      ['abc', '/a_b-c', '/a_b-c'],
      ['api', '/api', '/api'],
    ];
    for (const [name, pathPrefix, stored] of attached) {
      const res = await panel.api('POST', '/v1/routes', { domain, serviceId: services.get(name), pathPrefix });
      expect(res.status, `${pathPrefix}: ${JSON.stringify(res.body)}`).toBe(201);
      expect(res.body.pathPrefix).toBe(stored);
    }
    const expected: Array<[string, string]> = [
      ['/', 'site'],
      ['/apix', 'site'],
      ['/api', 'api'],
      ['/api/v2/x', 'api'],
      ['/api/v1', 'v1'],
      ['/api/v1/users?x=1', 'v1'],
      ['/API/V1/users', 'v1'],
      ['/a_b-c/q', 'abc'],
      ['/a_b-cd', 'site'],
    ];
    // Each attach is its own routing change: the first answering says nothing of the last (/api, attached last, once
    // answered from '/' while /api/v1 already answered), so wait for the last route attached.
    await waitFor(async () => (await get(domain, '/api/v1')).body === hostnames.get('v1') && (await get(domain, '/api')).body === hostnames.get('api'), { timeoutMs: 30_000, message: `routes answer\n${agent.process.output().slice(-2000)}` });
    for (const [p, name] of expected) expect((await get(domain, p)).body, p).toBe(hostnames.get(name));
    expect(await caddyLoadCount(caddy.adminUrl)).toBe(loads);
  });

  it('other shapes are 400 ROUTE_SHAPE_UNSUPPORTED', async () => {
    for (const pathPrefix of ['/a/b/c/d', '/a.b']) {
      const res = await panel.api('POST', '/v1/routes', { domain: `odd.${tag}.shapes.test`, serviceId: services.get('site'), pathPrefix });
      expect(res.status, pathPrefix).toBe(400);
      expect((res.body as { error: { code: string } }).error.code).toBe('ROUTE_SHAPE_UNSUPPORTED');
    }
  });
});
