import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, type PanelMessage } from '@tether/protocol';
import { sqlOf } from '../src/db/database.js';
import type { PanelError } from '../src/errors.js';
import { refuseUnreadableSecrets } from '../src/secrets/key-check.js';
import { certificateAad, openCertificates } from '../src/secrets/certificate-store.js';
import { generateKey, keyIdOf, loadKeyring } from '../src/secrets/keyring.js';
import { rotateSecrets } from '../src/rotate-command.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// Issue 24, secrets through the API and the session (real PostgreSQL, a real
// WebSocket agent driven by hand): write-only answers, merge by name, the
// names kept apart from env, sealed rows, values only in deploy/workloads
// frames of a capable agent and by the versions the deployment recorded, a
// key rotation, and a start without the key refused.

const KEY = generateKey();
const PLANTED = `planted-${randomBytes(12).toString('hex')}`;

const panelMain = fileURLToPath(new URL('../dist/main.js', import.meta.url));

type Deploy = Extract<PanelMessage, { type: 'deploy' }>;
type Workloads = Extract<PanelMessage, { type: 'workloads' }>;

describe('service secrets', () => {
  let panel: Panel;
  let teamId: string;
  const agents: RawAgent[] = [];

  beforeAll(async () => {
    panel = await startPanel({ env: { TETHER_SECRETS_KEY: KEY } });
    teamId = (await panel.api('POST', '/v1/teams', { name: `secrets-${process.pid}` })).body.id;
  });
  afterAll(async () => {
    for (const a of agents) a.socket.terminate();
    await panel?.close();
  });

  /** The built panel (dist/main.js) started on this test's database; resolves when it exits (or is stopped after 20 s). */
  function startPanelProcess(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
    return new Promise((resolve) => {
      const child = execFile(
        process.execPath,
        [panelMain],
        { env: { PATH: process.env.PATH, DATABASE_URL: panel.config.databaseUrl, TETHER_PORT: '0', TETHER_DATA_DIR: panel.dataDir, TETHER_LOG_LEVEL: 'silent', ...env }, timeout: 20_000 },
        (_err, _stdout, stderr) => resolve({ code: child.exitCode, stderr }),
      );
    });
  }

  async function nodeWithAgent(label: string, capabilities: string[]) {
    const node = await panel.createNode(`${label}-${process.pid}`);
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, capabilities });
    agents.push(agent);
    return { node, agent };
  }

  it('takes secrets beside env, answers names and versions only, merges by name and deletes with null', async () => {
    const node = await panel.createNode(`api-${process.pid}`);
    const created = await panel.api('POST', '/v1/services', { teamId, name: 'api', image: 'busybox:1', node: node.name, env: { MODE: 'x' }, secrets: { DB_PASSWORD: PLANTED, TOKEN: 't1' } });
    expect(created.status).toBe(201);
    expect(JSON.stringify(created.body)).not.toContain(PLANTED);
    expect(created.body.secrets.map((s: { name: string; version: number }) => [s.name, s.version])).toEqual([['DB_PASSWORD', 1], ['TOKEN', 1]]);
    expect(Date.parse(created.body.secrets[0].setAt)).toBeGreaterThan(Date.now() - 60_000);

    const patched = await panel.api('PATCH', `/v1/services/${created.body.id}`, { secrets: { TOKEN: 't2', API_KEY: 'k', DB_PASSWORD: null } });
    expect(patched.status).toBe(200);
    expect(patched.body.secrets.map((s: { name: string; version: number }) => [s.name, s.version])).toEqual([['API_KEY', 1], ['TOKEN', 2]]);
    expect(patched.body.env).toEqual({ MODE: 'x' });
    const read = await panel.api('GET', `/v1/services/${created.body.id}`);
    expect(read.body.secrets).toEqual(patched.body.secrets);

    // A name in both: refused on create, on a PATCH of env, and on a PATCH of secrets.
    const both = await panel.api('POST', '/v1/services', { teamId, name: 'api2', image: 'busybox:1', node: node.name, env: { TOKEN: 'a' }, secrets: { TOKEN: PLANTED } });
    expect(both.status).toBe(400);
    expect(both.body.error.code).toBe('SECRET_NAME_IN_ENV');
    expect(JSON.stringify(both.body)).not.toContain(PLANTED);
    expect((await panel.api('PATCH', `/v1/services/${created.body.id}`, { env: { API_KEY: 'v' } })).body.error.code).toBe('SECRET_NAME_IN_ENV');
    expect((await panel.api('PATCH', `/v1/services/${created.body.id}`, { secrets: { MODE: 'v' } })).body.error.code).toBe('SECRET_NAME_IN_ENV');
    // Removing a secret frees its name for env in the same PATCH.
    const moved = await panel.api('PATCH', `/v1/services/${created.body.id}`, { env: { MODE: 'x', API_KEY: 'now-plain' }, secrets: { API_KEY: null } });
    expect(moved.status).toBe(200);
    expect(moved.body.secrets.map((s: { name: string }) => s.name)).toEqual(['TOKEN']);
    // Bad names are refused like env's.
    expect((await panel.api('PATCH', `/v1/services/${created.body.id}`, { secrets: { '1BAD': 'v' } })).status).toBe(400);
  });

  it('stores only sealed rows: a random nonce per value and the key id on every row', async () => {
    const node = await panel.createNode(`rows-${process.pid}`);
    const res = await panel.api('POST', '/v1/services', { teamId, name: 'rows', image: 'busybox:1', node: node.name, secrets: { A: PLANTED, B: PLANTED } });
    const rows = await sqlOf(panel.prisma).rows<{ key_id: string; nonce: Buffer; ciphertext: Buffer }>(`SELECT key_id, nonce, ciphertext FROM service_secrets WHERE service_id = $1`, [res.body.id]);
    expect(rows).toHaveLength(2);
    for (const r of rows) {
      expect(r.key_id).toBe(keyIdOf(Buffer.from(KEY, 'base64')));
      expect(r.nonce).toHaveLength(12);
      expect(r.ciphertext.toString('latin1')).not.toContain(PLANTED);
    }
    expect(rows[0]!.nonce.equals(rows[1]!.nonce)).toBe(false);
    expect(rows[0]!.ciphertext.equals(rows[1]!.ciphertext)).toBe(false);
  });

  it('sends values only in deploy and workloads frames, by the versions the deployment recorded', async () => {
    const { node, agent } = await nodeWithAgent('capable', [CAPABILITIES.SECRETS]);
    const svc = await panel.api('POST', '/v1/services', { teamId, name: 'capable', image: 'busybox:1', node: node.name, env: { PLAIN: 'p' }, secrets: { PASS: PLANTED } });
    const dep = await panel.api('POST', `/v1/services/${svc.body.id}/deployments`, {});
    expect(dep.status).toBe(202);
    expect(dep.body.spec.secrets).toEqual([{ name: 'PASS', version: 1 }]);
    expect(JSON.stringify(dep.body)).not.toContain(PLANTED);
    const deploy = await agent.waitFor<Deploy>((m) => m.type === 'deploy' && m.workload.deploymentId === dep.body.id);
    expect(deploy.workload.secrets).toEqual({ PASS: PLANTED });
    expect(deploy.workload.env).toEqual({ PLAIN: 'p' });
    expect(deploy.workload).not.toHaveProperty('secretRefs');

    // A new version set but not deployed: a rebuild (workloads on a new session) still carries the recorded one.
    await panel.api('PATCH', `/v1/services/${svc.body.id}`, { secrets: { PASS: 'second-version' } });
    agent.socket.terminate();
    const again = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, capabilities: [CAPABILITIES.SECRETS] });
    agents.push(again);
    const set = await again.waitFor<Workloads>((m) => m.type === 'workloads' && m.workloads.length > 0, 10_000);
    expect(set.workloads.find((w) => w.serviceId === svc.body.id)?.secrets).toEqual({ PASS: PLANTED });
    const listed = await panel.api('GET', `/v1/services/${svc.body.id}/deployments`);
    expect(JSON.stringify(listed.body)).not.toContain(PLANTED);
  });

  it('ends the deployment failed AGENT_LACKS_CAPABILITY for an agent without the capability, and sends it nothing', async () => {
    const { node, agent } = await nodeWithAgent('older', []);
    const plain = await panel.api('POST', '/v1/services', { teamId, name: 'older-plain', image: 'busybox:1', node: node.name });
    expect((await panel.api('POST', `/v1/services/${plain.body.id}/deployments`, {})).status).toBe(202);
    const svc = await panel.api('POST', '/v1/services', { teamId, name: 'older', image: 'busybox:1', node: node.name, secrets: { PASS: PLANTED } });
    const dep = await panel.api('POST', `/v1/services/${svc.body.id}/deployments`, {});
    expect(dep.status).toBe(409);
    expect(dep.body.error.code).toBe('AGENT_LACKS_CAPABILITY');
    const [row] = await panel.prisma.deployment.findMany({ where: { serviceId: svc.body.id } });
    expect(row).toMatchObject({ status: 'failed' });
    expect(row!.reason).toMatch(/^AGENT_LACKS_CAPABILITY: .*"secrets"/);
    // Only the plain service was ever sent.
    expect(agent.received.filter((m) => m.type === 'deploy').map((m) => (m as Deploy).workload.serviceId)).toEqual([plain.body.id]);
    expect(JSON.stringify(agent.received)).not.toContain(PLANTED);
  });

  it('refuses values without a key, and a start without the key the rows need: one line, exit code 2', async () => {
    const keyless = await startPanelProcess({});
    expect(keyless.code).toBe(2);
    expect(keyless.stderr.trim().split('\n')).toHaveLength(1);
    expect(keyless.stderr).toMatch(/^✖ the database holds secrets encrypted under key k-[0-9a-f]{16} and it was given no key/);
    const other = await startPanelProcess({ TETHER_SECRETS_KEY: generateKey() });
    expect(other.code).toBe(2);
    expect(other.stderr).toMatch(/and it was given k-[0-9a-f]{16}: set TETHER_SECRETS_KEY/);
    // A panel without a key but without rows starts; it refuses values (and still removes).
    const bare = await startPanel({ pg: undefined });
    try {
      const node = await bare.createNode(`bare-${process.pid}`);
      const team = (await bare.api('POST', '/v1/teams', { name: 'bare' })).body.id;
      const res = await bare.api('POST', '/v1/services', { teamId: team, name: 'bare', image: 'busybox:1', node: node.name, secrets: { A: PLANTED } });
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe('SECRETS_NOT_CONFIGURED');
      expect(JSON.stringify(res.body)).not.toContain(PLANTED);
    } finally {
      await bare.close();
    }
  });

  it('rotation re-encrypts every row under the new key, shared certificate keys too; the old key alone no longer starts a panel', async () => {
    const next = generateKey();
    // A domain's shared certificate key (certificates.share) sealed under the old key, as storeCertificate seals it.
    const issuer = await panel.createNode(`rotate-issuer-${process.pid}`);
    const domain = `rotate-${process.pid}.example.test`;
    const certKey = `-----BEGIN PRIVATE KEY-----\n${PLANTED}\n-----END PRIVATE KEY-----\n`;
    const sealed = loadKeyring({ keys: KEY, keyFile: undefined })!.seal(certKey, certificateAad(domain));
    await sqlOf(panel.prisma).run(
      `INSERT INTO domain_certificates (domain, issuer_node_id, certificate_pem, key_id, key_nonce, key_ciphertext, not_after) VALUES ($1, $2, 'chain', $3, $4, $5, now() + interval '30 days')`,
      [domain, issuer.id, sealed.keyId, Buffer.from(sealed.nonce), Buffer.from(sealed.ciphertext)],
    );
    // A domain whose issuer has not reported yet holds no key: nothing to open or move.
    await sqlOf(panel.prisma).run(`INSERT INTO domain_certificates (domain, issuer_node_id) VALUES ($1, $2)`, [`pending-${domain}`, issuer.id]);
    const before = await sqlOf(panel.prisma).rows<{ id: string; ciphertext: Buffer }>(`SELECT id::text, ciphertext FROM service_secrets ORDER BY id`);
    expect(before.length).toBeGreaterThan(3);
    const lines: string[] = [];
    // Without the old key the rows cannot be opened: refused, nothing changes.
    expect(await rotateSecrets({ DATABASE_URL: panel.config.databaseUrl, TETHER_SECRETS_KEY: next, TETHER_LOG_LEVEL: 'silent' }, (l) => lines.push(l))).toBe(2);
    expect(lines.at(-1)).toMatch(/not given/);
    expect(await rotateSecrets({ DATABASE_URL: panel.config.databaseUrl, TETHER_SECRETS_KEY: `${next},${KEY}` }, (l) => lines.push(l))).toBe(0);
    expect(lines.at(-1)).toContain(`re-encrypted ${before.length} secret row(s)`);
    expect(lines.at(-1)).toContain('and 1 certificate row(s)');
    const after = await sqlOf(panel.prisma).rows<{ id: string; key_id: string; ciphertext: Buffer }>(`SELECT id::text, key_id, ciphertext FROM service_secrets ORDER BY id`);
    expect(after.map((r) => r.key_id)).toEqual(after.map(() => keyIdOf(Buffer.from(next, 'base64'))));
    for (let i = 0; i < after.length; i++) expect(after[i]!.ciphertext.equals(before[i]!.ciphertext)).toBe(false);
    // Run again: nothing left to move.
    expect(await rotateSecrets({ DATABASE_URL: panel.config.databaseUrl, TETHER_SECRETS_KEY: next }, (l) => lines.push(l))).toBe(0);
    expect(lines.at(-1)).toContain('re-encrypted 0 secret row(s)');
    expect(lines.at(-1)).toContain('and 0 certificate row(s)');
    const newOnly = loadKeyring({ keys: next, keyFile: undefined })!;
    const opened = await openCertificates(panel.prisma, newOnly, [domain]);
    expect(opened.unreadable).toEqual([]);
    expect(opened.certificates.map((c) => c.keyPem)).toEqual([certKey]);
    expect(await refuseUnreadableSecrets(panel.prisma, newOnly)).toBeUndefined();
    const old = await refuseUnreadableSecrets(panel.prisma, loadKeyring({ keys: KEY, keyFile: undefined })).catch((err: unknown) => err);
    expect((old as PanelError).code).toBe('SECRETS_KEY_MISSING');
  });
});
