import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerApi, ensureDocker, ensureRegistryTools, ensureWebImage, waitFor, type PrivateRegistry, startPrivateRegistry } from '@tether/testkit';
import { generateKey } from '../src/secrets/keyring.js';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { expectDeployAccepted } from './helpers/deploy-answer.js';

// Issue 24, private registries, against the real thing: Debian's
// docker-registry (2.8) with htpasswd auth and TLS from a CA made here, trusted
// by this machine's Docker engine (/etc/docker/certs.d), a real panel and a
// real agent. Team A's credentials pull and run its image; wrong credentials,
// a missing tag and a stopped registry end the deployment with their own
// codes; team B's service naming A's image, now on the node, does not run.

const PASSWORD = `pw-${randomBytes(12).toString('hex')}`;
const WRONG = `wrong-${randomBytes(12).toString('hex')}`;

const docker = await ensureDocker();
const tools = await ensureRegistryTools();

describe.skipIf(!docker.available || !tools.available)('private registries: pulls with a team\'s credentials, coded failures', () => {
  let panel: Panel;
  let agent: AgentProcess;
  let registry: PrivateRegistry;
  let image: string;
  let panelLog = '';
  const answers: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      panelLog += chunk.toString('utf8');
      done();
    },
  });
  const api = async (method: string, url: string, body?: unknown) => {
    const res = await panel.api(method, url, body);
    answers.push(JSON.stringify(res.body));
    return res;
  };

  beforeAll(async () => {
    registry = await startPrivateRegistry([{ username: 'team-a', password: PASSWORD }]);
    // The pushed tag is removed from the engine again: the agent's first deploy really pulls it.
    image = await registry.push(await ensureWebImage(), `team-a/web:${process.pid}`, { username: 'team-a', password: PASSWORD });
    panel = await startPanel({ env: { TETHER_SECRETS_KEY: generateKey(), TETHER_HEARTBEAT_INTERVAL_MS: '300' }, logger: pino({ level: 'debug' }, sink) });
    const node = await panel.createNode(`registries-${process.pid}`);
    agent = await startAgentProcess({
      panelUrl: panel.url,
      token: node.token,
      nodeName: node.name,
      runtime: 'docker',
      env: { TETHER_LOG_LEVEL: 'debug', TETHER_MIN_READY_MS: '300', TETHER_DRAIN_MS: '100', TETHER_IMAGE_PULL_TIMEOUT_MS: '20000' },
    });
    await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000, message: 'agent session' });
    nodeName = node.name;
  }, 120_000);
  afterAll(async () => {
    await agent?.destroy();
    await panel?.close();
    await registry?.destroy();
    if (image) await dockerApi('DELETE', `/images/${encodeURIComponent(image)}?force=true`).catch(() => undefined);
  });
  let nodeName = '';

  async function team(name: string, credentials?: { username: string; password: string }): Promise<string> {
    const t = await api('POST', '/v1/teams', { name: `${name}-${process.pid}` });
    expect(t.status).toBe(201);
    if (credentials) {
      const r = await api('POST', '/v1/registries', { teamId: t.body.id, host: registry.host, ...credentials });
      expect(r.status).toBe(201);
      expect(JSON.stringify(r.body)).not.toContain(credentials.password);
    }
    return t.body.id as string;
  }

  /** Creates a service of `imageRef` for the team, deploys it and reads the deployment's final row. */
  async function deploy(teamId: string, name: string, imageRef: string): Promise<{ id: string; status: string; reason: string | null }> {
    const service = await api('POST', '/v1/services', { teamId, name, image: imageRef, node: nodeName, internalPort: 8080 });
    expect(service.status).toBe(201);
    const res = await api('POST', `/v1/services/${service.body.id}/deployments`, {});
    expectDeployAccepted(panel, res, { serviceId: service.body.id });
    const stream = await fetch(`${panel.url}/v1/deployments/${res.body.id}/events`, { headers: { authorization: `Bearer ${panel.operatorToken}` } });
    answers.push(await stream.text());
    const final = await api('GET', `/v1/deployments/${res.body.id}`);
    return { id: res.body.id as string, status: final.body.status as string, reason: final.body.reason as string | null };
  }

  async function containersOf(deploymentId: string): Promise<unknown[]> {
    const list = await dockerApi('GET', `/containers/json?all=true&filters=${encodeURIComponent(JSON.stringify({ label: [`tether.deployment=${deploymentId}`] }))}`);
    return JSON.parse(list.body) as unknown[];
  }

  it('pulls and runs with the right credentials; refuses wrong ones, a missing tag, another team, a stopped registry', async () => {
    expect((await dockerApi('GET', `/images/${encodeURIComponent(image)}/json`)).status).toBe(404);
    const teamA = await team('reg-a', { username: 'team-a', password: PASSWORD });

    const ok = await deploy(teamA, 'web', image);
    expect(ok, JSON.stringify(ok)).toMatchObject({ status: 'running' });
    expect(await containersOf(ok.id)).toHaveLength(1);
    expect((await dockerApi('GET', `/images/${encodeURIComponent(image)}/json`)).status).toBe(200);

    const missing = await deploy(teamA, 'web-missing', `${registry.host}/team-a/web:no-such-tag`);
    expect(missing.status).toBe('failed');
    expect(missing.reason).toMatch(/^IMAGE_NOT_FOUND: registry 127\.0\.0\.1:\d+ has no image/);

    // Wrong credentials for the image A's pull left on the node: checked against the registry, refused.
    const teamC = await team('reg-c', { username: 'team-a', password: WRONG });
    const wrong = await deploy(teamC, 'web', image);
    expect(wrong.status).toBe('failed');
    expect(wrong.reason).toMatch(/^REGISTRY_AUTH_FAILED: registry 127\.0\.0\.1:\d+ refused to let this service pull .* with the credentials of user team-a \(the image is on this node/);
    expect(await containersOf(wrong.id)).toHaveLength(0);

    // Team B has no credentials at all: A's private image on the node does not run for it.
    const teamB = await team('reg-b');
    const other = await deploy(teamB, 'web', image);
    expect(other.status).toBe('failed');
    expect(other.reason).toMatch(/^REGISTRY_AUTH_FAILED: .*without credentials/);
    expect(await containersOf(other.id)).toHaveLength(0);

    await registry.stop();
    const down = await deploy(teamA, 'web-other', `${registry.host}/team-a/other:1`);
    expect(down.status).toBe('failed');
    expect(down.reason).toMatch(/^REGISTRY_UNREACHABLE: registry 127\.0\.0\.1:\d+ could not be reached/);
    // Team A's own image, checked with its credentials by this agent, still runs while the registry is down.
    const again = await deploy(teamA, 'web-again', image);
    expect(again, JSON.stringify(again)).toMatchObject({ status: 'running' });

    // The password went to the agent and nowhere else.
    await panel.settled();
    for (const [channel, text] of Object.entries({ answers: answers.join('\n'), panelLog, agentLog: agent.process.output() })) {
      expect({ channel, leak: [PASSWORD, WRONG].filter((p) => text.includes(p)) }).toEqual({ channel, leak: [] });
    }
  }, 180_000);
});
