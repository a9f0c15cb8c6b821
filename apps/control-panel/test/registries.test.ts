import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, type PanelMessage } from '@tether/protocol';
import { sqlOf } from '../src/db/database.js';
import { generateKey, keyIdOf } from '../src/secrets/keyring.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// Issue 24, private registries through the API and the session (real
// PostgreSQL, a real WebSocket agent driven by hand): one per team and
// normalised host, write-only and sealed, team-scoped, audited; credentials
// only in deploy and workloads frames of an agent announcing registry.auth,
// and for the image's own host. The pulls themselves: e2e-registries.test.ts.

const KEY = generateKey();
const PLANTED = `planted-${randomBytes(12).toString('hex')}`;

type Deploy = Extract<PanelMessage, { type: 'deploy' }>;
type Workloads = Extract<PanelMessage, { type: 'workloads' }>;

describe('private registries', () => {
  let panel: Panel;
  let teamA: string;
  let teamB: string;
  let tokenA: string;
  let tokenB: string;
  const agents: RawAgent[] = [];

  beforeAll(async () => {
    panel = await startPanel({ env: { TETHER_SECRETS_KEY: KEY } });
    teamA = (await panel.api('POST', '/v1/teams', { name: `reg-a-${process.pid}` })).body.id;
    teamB = (await panel.api('POST', '/v1/teams', { name: `reg-b-${process.pid}` })).body.id;
    tokenA = (await panel.api('POST', `/v1/teams/${teamA}/tokens`, { name: 'a' })).body.token;
    tokenB = (await panel.api('POST', `/v1/teams/${teamB}/tokens`, { name: 'b' })).body.token;
  });
  afterAll(async () => {
    for (const a of agents) a.socket.terminate();
    await panel?.close();
  });

  it('keeps one per team and normalised host, answers never the password, scopes by team and audits each change', async () => {
    const created = await panel.api('POST', '/v1/registries', { host: 'Index.Docker.IO', username: 'ci', password: PLANTED }, tokenA);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ teamId: teamA, host: 'docker.io', username: 'ci' });
    expect(Object.keys(created.body).sort()).toEqual(['createdAt', 'host', 'id', 'teamId', 'updatedAt', 'username']);
    // docker.io's aliases are one host; another team may have its own.
    const twice = await panel.api('POST', '/v1/registries', { host: 'registry-1.docker.io', username: 'x', password: 'y' }, tokenA);
    expect([twice.status, twice.body.error?.code]).toEqual([409, 'CONFLICT']);
    expect((await panel.api('POST', '/v1/registries', { host: 'docker.io', username: 'b', password: 'b' }, tokenB)).status).toBe(201);
    // The port is part of the host.
    expect((await panel.api('POST', '/v1/registries', { host: 'REG.example.com:5000', username: 'u', password: 'p' }, tokenA)).body.host).toBe('reg.example.com:5000');
    expect((await panel.api('POST', '/v1/registries', { host: 'reg.example.com:5001', username: 'u', password: 'p' }, tokenA)).status).toBe(201);
    for (const host of ['bad host', 'a/b', '-x.example', '']) {
      const res = await panel.api('POST', '/v1/registries', { host, username: 'u', password: 'p' }, tokenA);
      expect([host, res.status]).toEqual([host, 400]);
    }
    expect((await panel.api('POST', '/v1/registries', { host: 'bad host', username: 'u', password: 'p' }, tokenA)).body.error.code).toBe('INVALID_REGISTRY_HOST');
    // Operators name the team.
    expect((await panel.api('POST', '/v1/registries', { host: 'ghcr.io', username: 'u', password: 'p' })).body.error.code).toBe('VALIDATION_FAILED');

    const listA = await panel.api('GET', '/v1/registries', undefined, tokenA);
    expect(listA.body.map((r: { host: string }) => r.host)).toEqual(['docker.io', 'reg.example.com:5000', 'reg.example.com:5001']);
    expect((await panel.api('GET', '/v1/registries', undefined, tokenB)).body).toHaveLength(1);
    expect((await panel.api('GET', '/v1/registries')).body).toHaveLength(4);
    expect((await panel.api('GET', `/v1/registries?teamId=${teamB}`)).body).toHaveLength(1);
    // Another team's registry does not exist for B: read, replace, delete.
    expect((await panel.api('GET', `/v1/registries/${created.body.id}`, undefined, tokenB)).status).toBe(404);
    expect((await panel.api('PUT', `/v1/registries/${created.body.id}`, { host: 'docker.io', username: 'b', password: 'b' }, tokenB)).status).toBe(404);
    expect((await panel.api('DELETE', `/v1/registries/${created.body.id}`, undefined, tokenB)).status).toBe(404);

    const replaced = await panel.api('PUT', `/v1/registries/${created.body.id}`, { host: 'docker.io', username: 'ci2', password: `${PLANTED}-2` }, tokenA);
    expect(replaced.body).toMatchObject({ id: created.body.id, username: 'ci2', host: 'docker.io' });
    expect(Date.parse(replaced.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(created.body.updatedAt));
    const moved = (await panel.api('GET', '/v1/registries', undefined, tokenA)).body.find((r: { host: string }) => r.host === 'reg.example.com:5001');
    expect((await panel.api('PUT', `/v1/registries/${moved.id}`, { host: 'reg.example.com:5000', username: 'u', password: 'p' }, tokenA)).status).toBe(409);
    expect((await panel.api('DELETE', `/v1/registries/${moved.id}`, undefined, tokenA)).status).toBe(204);
    expect((await panel.api('GET', `/v1/registries/${moved.id}`, undefined, tokenA)).status).toBe(404);

    const everything = JSON.stringify(await Promise.all(['/v1/registries', `/v1/registries/${created.body.id}`, '/v1/audit'].map((u) => panel.api('GET', u).then((r) => r.body))));
    expect(everything).not.toContain(PLANTED);

    const audit = await panel.api('GET', `/v1/audit?targetType=registry&teamId=${teamA}`);
    const actions = audit.body.items.filter((i: { outcome: string }) => i.outcome === 'success').map((i: { action: string }) => i.action).sort();
    expect(actions).toEqual(['registry.create', 'registry.create', 'registry.create', 'registry.delete', 'registry.replace']);
    // B's refused attempts on A's registry are rows too (written through the session-fact outbox).
    await panel.settled();
    const refused = await panel.api('GET', `/v1/audit?outcome=refused&teamId=${teamB}&targetType=registry`);
    expect(refused.body.items.map((i: { action: string; code: string }) => `${i.action} ${i.code}`).sort()).toEqual(['registry.delete NOT_FOUND', 'registry.replace NOT_FOUND']);
  });

  it('stores the password sealed under the keyring: key id, a random nonce, bound to its row', async () => {
    const rows = await sqlOf(panel.prisma).rows<{ id: string; key_id: string; nonce: Buffer; ciphertext: Buffer }>(`SELECT id, key_id, nonce, ciphertext FROM registries WHERE team_id = $1`, [teamA]);
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      expect(r.key_id).toBe(keyIdOf(Buffer.from(KEY, 'base64')));
      expect(r.nonce).toHaveLength(12);
      expect(r.ciphertext.toString('latin1')).not.toContain(PLANTED);
    }
  });

  it("sends the team's credentials for the image's host only, only to an agent announcing registry.auth", async () => {
    const node = await panel.createNode(`reg-capable-${process.pid}`);
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, capabilities: [CAPABILITIES.REGISTRY_AUTH] });
    agents.push(agent);
    const hub = await panel.api('POST', '/v1/services', { name: 'hub', image: 'acme/app:1', node: node.name }, tokenA);
    const other = await panel.api('POST', '/v1/services', { name: 'other', image: 'ghcr.io/acme/app:1', node: node.name }, tokenA);
    const dep = await panel.api('POST', `/v1/services/${hub.body.id}/deployments`, {}, tokenA);
    expect(dep.status).toBe(202);
    const registry = (await panel.api('GET', '/v1/registries', undefined, tokenA)).body.find((r: { host: string }) => r.host === 'docker.io');
    expect(dep.body.spec.registry).toEqual({ id: registry.id, host: 'docker.io' });
    expect(JSON.stringify(dep.body)).not.toContain(PLANTED);
    const deploy = await agent.waitFor<Deploy>((m) => m.type === 'deploy' && m.workload.deploymentId === dep.body.id);
    // The replaced credentials (PUT above): what the registry holds when the frame leaves.
    expect(deploy.workload.registryAuth).toEqual({ host: 'docker.io', username: 'ci2', password: `${PLANTED}-2` });
    expect(deploy.workload).not.toHaveProperty('registryRef');
    const plain = await panel.api('POST', `/v1/services/${other.body.id}/deployments`, {}, tokenA);
    expect(plain.body.spec).not.toHaveProperty('registry');
    const plainFrame = await agent.waitFor<Deploy>((m) => m.type === 'deploy' && m.workload.deploymentId === plain.body.id);
    expect(plainFrame.workload).not.toHaveProperty('registryAuth');

    // A rebuild on a new session: the workloads set carries them too.
    agent.socket.terminate();
    const again = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, capabilities: [CAPABILITIES.REGISTRY_AUTH] });
    agents.push(again);
    const set = await again.waitFor<Workloads>((m) => m.type === 'workloads' && m.workloads.length > 0, 10_000);
    expect(set.workloads.find((w) => w.serviceId === hub.body.id)?.registryAuth?.password).toBe(`${PLANTED}-2`);
    expect(set.workloads.find((w) => w.serviceId === other.body.id)).not.toHaveProperty('registryAuth');

    // An agent without the capability: the deployment ends failed and nothing is sent.
    const oldNode = await panel.createNode(`reg-older-${process.pid}`);
    const older = await RawAgent.connect({ url: panel.url, token: oldNode.token, node: oldNode.name, capabilities: [] });
    agents.push(older);
    const svc = await panel.api('POST', '/v1/services', { name: 'hub-old', image: 'index.docker.io/acme/app:1', node: oldNode.name }, tokenA);
    const refused = await panel.api('POST', `/v1/services/${svc.body.id}/deployments`, {}, tokenA);
    expect([refused.status, refused.body.error.code]).toEqual([409, 'AGENT_LACKS_CAPABILITY']);
    const [row] = await panel.prisma.deployment.findMany({ where: { serviceId: svc.body.id } });
    expect(row).toMatchObject({ status: 'failed' });
    expect(row!.reason).toMatch(/^AGENT_LACKS_CAPABILITY: .*"registry\.auth".*registry/);
    expect(older.received.filter((m) => m.type === 'deploy')).toEqual([]);
    expect(JSON.stringify(older.received)).not.toContain(PLANTED);
  });

  it('a tampered registry or secret row answers STORED_SECRET_UNREADABLE (not 500), the deployment ends failed, nothing is sent', async () => {
    const node = await panel.createNode(`reg-tamper-${process.pid}`);
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, capabilities: [CAPABILITIES.REGISTRY_AUTH, CAPABILITIES.SECRETS] });
    agents.push(agent);
    const reg = await panel.api('POST', '/v1/registries', { host: 'tamper.example.com', username: 'u', password: PLANTED }, tokenA);
    const svc = await panel.api('POST', '/v1/services', { name: 'tamper', image: 'tamper.example.com/acme/app:1', node: node.name }, tokenA);
    // One byte of the ciphertext changed: GCM's tag no longer authenticates.
    await sqlOf(panel.prisma).run(`UPDATE registries SET ciphertext = set_byte(ciphertext, 0, get_byte(ciphertext, 0) # 1) WHERE id = $1`, [reg.body.id]);
    const dep = await panel.api('POST', `/v1/services/${svc.body.id}/deployments`, {}, tokenA);
    expect([dep.status, dep.body.error.code]).toEqual([409, 'STORED_SECRET_UNREADABLE']);
    const [row] = await panel.prisma.deployment.findMany({ where: { serviceId: svc.body.id } });
    expect(row).toMatchObject({ status: 'failed' });
    expect(row!.reason).toMatch(/^SECRET_UNREADABLE: a stored secret under key k-[0-9a-f]{16} does not authenticate/);

    const secretful = await panel.api('POST', '/v1/services', { name: 'tamper-secret', image: 'acme/plain:1', node: node.name, secrets: { PASS: PLANTED } }, tokenB);
    await sqlOf(panel.prisma).run(`UPDATE service_secrets SET nonce = set_byte(nonce, 0, get_byte(nonce, 0) # 1) WHERE service_id = $1`, [secretful.body.id]);
    const dep2 = await panel.api('POST', `/v1/services/${secretful.body.id}/deployments`, {}, tokenB);
    expect([dep2.status, dep2.body.error.code]).toEqual([409, 'STORED_SECRET_UNREADABLE']);
    expect(JSON.stringify([dep.body, dep2.body])).not.toContain(PLANTED);
    expect(agent.received.filter((m) => m.type === 'deploy')).toEqual([]);
  });
});
