import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerApi, ensureDocker, ensureWebImage, freePort, waitFor } from '@tether/testkit';
import { sqlOf } from '../src/db/database.js';
import { generateKey } from '../src/secrets/keyring.js';
import { rotateSecrets } from '../src/rotate-command.js';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { expectDeployAccepted } from './helpers/deploy-answer.js';

// Issue 24's headline: a unique secret value (and a registry password) is planted, deployed, redeployed,
// set anew (a second planted value), carried across a key rotation (run the
// way docs/operations.md orders it: both keys on the panel, then the command)
// and an agent restart (its `workloads` set rebuilds from the versions the
// deployment recorded). Then every channel is searched: every API answer and
// event stream, the panel's and the agent's logs at debug level, every row of
// the database, the panel's data folder (the outbox spill file), /metrics of
// both apps and the fleet page's data. The values are found in one place
// only: the container's environment (real Docker).

const OLD_KEY = generateKey();
const NEW_KEY = generateKey();
const FIRST = `first-${randomBytes(16).toString('hex')}`;
const SECOND = `second-${randomBytes(16).toString('hex')}`;
/** A registry password: it travels in deploy and workloads frames, and is found nowhere (the local image needs no pull). */
const REGISTRY_PASSWORD = `registry-${randomBytes(16).toString('hex')}`;
/** The forms a value could leak in: as text, hex, base64. */
const forms = (value: string) => [value, Buffer.from(value).toString('hex'), Buffer.from(value).toString('base64').replace(/=+$/, '')];
const leaks = (haystack: string) => [FIRST, SECOND, REGISTRY_PASSWORD].flatMap(forms).filter((form) => haystack.includes(form));

const docker = await ensureDocker();

describe.skipIf(!docker.available)('a secret value is found only in the container it was meant for', () => {
  let panel: Panel;
  let agent: AgentProcess;
  let agentMetricsPort: number;
  let image: string;
  let panelLog = '';
  /** Output of the agent processes stopped so far (each keeps its own). */
  let earlierAgentLog = '';
  /** Every answer and stream of the API, as text. */
  const answers: string[] = [];

  const api = async (method: string, url: string, body?: unknown) => {
    const res = await panel.api(method, url, body);
    answers.push(JSON.stringify(res.body));
    return res;
  };
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      panelLog += chunk.toString('utf8');
      done();
    },
  });

  beforeAll(async () => {
    image = await ensureWebImage();
    panel = await startPanel({
      // Step 1 of the documented rotation: the new key beside the old one, the old one still encrypting.
      env: { TETHER_SECRETS_KEY: `${OLD_KEY},${NEW_KEY}`, TETHER_HEARTBEAT_INTERVAL_MS: '300' },
      logger: pino({ level: 'debug' }, sink),
    });
  });
  afterAll(async () => {
    await agent?.destroy();
    await panel?.close();
  });

  async function startAgent(node: { id: string; name: string; token: string }, stateDir?: string) {
    agentMetricsPort = await freePort();
    agent = await startAgentProcess({
      panelUrl: panel.url,
      token: node.token,
      nodeName: node.name,
      runtime: 'docker',
      ...(stateDir ? { stateDir } : {}),
      env: { TETHER_LOG_LEVEL: 'debug', TETHER_AGENT_METRICS_PORT: String(agentMetricsPort), TETHER_MIN_READY_MS: '300', TETHER_DRAIN_MS: '100' },
    });
    await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000, message: 'agent session' });
  }

  async function deployRunning(serviceId: string): Promise<string> {
    const res = await api('POST', `/v1/services/${serviceId}/deployments`, {});
    expectDeployAccepted(panel, res, { serviceId });
    // The deployment's event stream, read to its final state.
    const stream = await fetch(`${panel.url}/v1/deployments/${res.body.id}/events`, { headers: { authorization: `Bearer ${panel.operatorToken}` } });
    const text = await stream.text();
    answers.push(text);
    expect(text).toMatch(/"status":"running"/);
    return res.body.id as string;
  }

  /** The environment of the service's running container, read from Docker. */
  async function containerEnv(deploymentId: string): Promise<string[]> {
    const list = await dockerApi('GET', `/containers/json?filters=${encodeURIComponent(JSON.stringify({ label: [`tether.deployment=${deploymentId}`] }))}`);
    const [container] = JSON.parse(list.body) as { Id: string }[];
    expect(container).toBeDefined();
    const inspect = JSON.parse((await dockerApi('GET', `/containers/${container!.Id}/json`)).body) as { Config: { Env: string[] } };
    return inspect.Config.Env;
  }

  it('deploys, redeploys, sets anew, rotates the key and rebuilds; only the container holds the value', async () => {
    const node = await panel.createNode(`secrets-${process.pid}`);
    await startAgent(node);
    const team = await api('POST', '/v1/teams', { name: `e2e-secrets-${process.pid}` });
    // Credentials for the image's registry (docker.io: the local test image names no host): every deploy carries them.
    const registry = await api('POST', '/v1/registries', { teamId: team.body.id, host: 'index.docker.io', username: 'ci', password: REGISTRY_PASSWORD });
    expect(registry.status).toBe(201);
    expect(registry.body.host).toBe('docker.io');
    const service = await api('POST', '/v1/services', {
      teamId: team.body.id,
      name: 'vault',
      image,
      node: node.name,
      env: { MESSAGE: 'plain' },
      secrets: { DB_PASSWORD: FIRST },
      internalPort: 8080,
    });
    expect(service.status).toBe(201);
    const serviceId = service.body.id as string;

    const first = await deployRunning(serviceId);
    expect((await api('GET', `/v1/deployments/${first}`)).body.spec.registry).toEqual({ id: registry.body.id, host: 'docker.io' });
    expect(await containerEnv(first)).toEqual(expect.arrayContaining(['MESSAGE=plain', `DB_PASSWORD=${FIRST}`]));
    // The search finds a value where it is: the check below can fail.
    expect(leaks((await containerEnv(first)).join('\n'))).toEqual([FIRST]);

    const redeployed = await deployRunning(serviceId);
    expect(await containerEnv(redeployed)).toContain(`DB_PASSWORD=${FIRST}`);

    expect((await api('PATCH', `/v1/services/${serviceId}`, { secrets: { DB_PASSWORD: SECOND, API_TOKEN: SECOND } })).status).toBe(200);
    const third = await deployRunning(serviceId);
    expect(await containerEnv(third)).toEqual(expect.arrayContaining([`DB_PASSWORD=${SECOND}`, `API_TOKEN=${SECOND}`]));

    // Step 3 of the rotation: every row moves to the new key; the panel (old,new) still opens them.
    const lines: string[] = [];
    expect(await rotateSecrets({ DATABASE_URL: panel.config.databaseUrl, TETHER_SECRETS_KEY: `${NEW_KEY},${OLD_KEY}` }, (l) => lines.push(l))).toBe(0);
    expect(lines.join('\n')).toMatch(/re-encrypted 3 secret row\(s\), 1 registry row\(s\) and 0 certificate row\(s\)/);
    const afterRotation = await deployRunning(serviceId);
    expect(await containerEnv(afterRotation)).toContain(`DB_PASSWORD=${SECOND}`);

    // An agent restart: the new session's `workloads` set carries the recorded versions; the container is kept or rebuilt with them.
    const stateDir = agent.stateDir;
    await agent.stop();
    earlierAgentLog += agent.process.output();
    await startAgent(node, stateDir);
    await waitFor(async () => (await api('GET', `/v1/services/${serviceId}/status`)).body.state === 'running', { timeoutMs: 15_000, message: 'running after the agent restart' });
    expect(await containerEnv(afterRotation)).toContain(`DB_PASSWORD=${SECOND}`);

    // A rollback (issue 22) goes through the same delivery; its answer (api() keeps every answer) and its row are searched too.
    const rollback = await api('POST', `/v1/services/${serviceId}/rollback?wait=30`, {});
    expect(rollback.body).toMatchObject({ status: 'running', rollbackOf: third });
    expect(await containerEnv(rollback.body.id as string)).toContain(`DB_PASSWORD=${SECOND}`);

    // Every other channel.
    for (const url of [`/v1/deployments/${rollback.body.id}`, '/v1/registries', `/v1/registries/${registry.body.id}`, '/v1/services', `/v1/services/${serviceId}`, `/v1/services/${serviceId}/deployments`, `/v1/services/${serviceId}/status`, '/v1/sessions', '/v1/nodes', `/v1/deployments/${first}`]) {
      expect((await api('GET', url)).status).toBe(200);
    }
    const channels: Record<string, string> = { answers: answers.join('\n') };
    channels.panelMetrics = await (await fetch(`${panel.url}/metrics`)).text();
    channels.agentMetrics = await (await fetch(`http://127.0.0.1:${agentMetricsPort}/metrics`)).text();
    const signIn = await fetch(`${panel.url}/dashboard/api/sign-in`, { method: 'POST', headers: { 'content-type': 'application/json', origin: panel.url }, body: JSON.stringify({ token: panel.operatorToken }) });
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    channels.fleetNode = await (await fetch(`${panel.url}/dashboard/api/nodes/${node.id}`, { headers: { cookie } })).text();
    channels.fleetStream = await readFor(`${panel.url}/dashboard/api/stream`, cookie, 1_500);
    expect(channels.fleetStream).toContain(node.name);
    channels.database = await dumpDatabase(panel);
    expect(channels.database).toContain('DB_PASSWORD');
    expect(channels.database).toContain(registry.body.id);
    channels.dataDir = await readTree(panel.dataDir);
    await panel.settled();
    channels.panelLog = panelLog;
    channels.agentLog = earlierAgentLog + agent.process.output();
    // The logs are at debug level and tell of these deployments.
    expect(channels.panelLog).toMatch(/"level":20/);
    expect(channels.agentLog).toMatch(/"level":20/);
    expect(channels.agentLog).toContain(afterRotation);
    for (const [name, text] of Object.entries(channels)) expect({ name, leaks: leaks(text) }).toEqual({ name, leaks: [] });
  });
});

/** Every row of every table in the public schema, as text (bytea as hex): what a dump holds. */
async function dumpDatabase(panel: Panel): Promise<string> {
  const sql = sqlOf(panel.prisma);
  const tables = await sql.rows<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`);
  const parts: string[] = [];
  for (const { table_name } of tables) {
    const rows = await sql.rows<{ row: string }>(`SELECT t::text AS row FROM "${table_name}" t`);
    parts.push(`-- ${table_name}`, ...rows.map((r) => r.row));
  }
  return parts.join('\n');
}

/** Every file under a folder, concatenated. */
async function readTree(dir: string): Promise<string> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) out.push(await readFile(path.join(entry.parentPath, entry.name), 'utf8').catch(() => ''));
  }
  return out.join('\n');
}

async function readFor(url: string, cookie: string, ms: number): Promise<string> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  let text = '';
  try {
    const res = await fetch(url, { headers: { cookie }, signal: controller.signal });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    // Aborted: the text so far is the page's data.
  } finally {
    clearTimeout(timer);
  }
  return text;
}
