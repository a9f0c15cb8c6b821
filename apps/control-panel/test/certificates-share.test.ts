import { execFileSync } from 'node:child_process';
import { createPrivateKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, type PanelMessage, type Route, type SharedCertificate } from '@tether/protocol';
import { sqlOf } from '../src/db/database.js';
import { generateKey } from '../src/secrets/keyring.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// One certificate issuer per domain, the panel's part (capability
// certificates.share), with a real panel and two hand-driven agents serving
// one domain: the issuer is chosen and named in the other node's map with
// its challenge endpoint; a report from the issuer is stored (the key sealed)
// and ACKed, one from another node is refused with CERTIFICATE_NOT_ISSUER, a
// certificate that is not its key's with CERTIFICATE_INVALID; the other node
// gets the certificate and key in `certificates`. Secrets are write-only: the
// planted key is then searched for in every API answer, the panel's debug log,
// the audit rows and the database row itself, and found in none.

const DOMAIN = 'shop.example.test';
const SHARING = [CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.ROUTING_REMOTE, CAPABILITIES.CERTIFICATES_SHARE, CAPABILITIES.SECRETS];

function selfSigned(domain: string): { certificatePem: string; keyPem: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tether-cert-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${dir}/k.pem`, '-out', `${dir}/c.pem`, '-days', '30', '-subj', `/CN=${domain}`, '-addext', `subjectAltName=DNS:${domain}`], { stdio: 'ignore' });
    return { certificatePem: readFileSync(`${dir}/c.pem`, 'utf8'), keyPem: readFileSync(`${dir}/k.pem`, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const planted = selfSigned(DOMAIN);
const other = selfSigned(DOMAIN);
/** The forms the key could leak in: its PEM, its base64 body (any 40 characters of it), its DER in hex and base64. */
const keyForms = (() => {
  const body = planted.keyPem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
  const der = createPrivateKey(planted.keyPem).export({ format: 'der', type: 'pkcs8' });
  const chunks = [];
  for (let i = 0; i + 40 <= body.length; i += 40) chunks.push(body.slice(i, i + 40));
  return [planted.keyPem, body, ...chunks, der.toString('hex'), der.toString('base64').slice(20, 60)];
})();
const leaks = (haystack: string) => keyForms.filter((f) => haystack.includes(f));
const report = (c: { certificatePem: string; keyPem: string }, notAfter = new Date(Date.now() + 86_400_000).toISOString()): SharedCertificate => ({ domain: DOMAIN, ...c, notAfter });

describe('certificates.share on the panel', () => {
  let panel: Panel;
  let a: RawAgent;
  let b: RawAgent;
  let log = '';
  const answers: string[] = [];
  const statuses: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      log += chunk.toString('utf8');
      done();
    },
  });
  let serviceId = '';
  let routeId = '';
  const nodeIds: Record<string, string> = {};

  beforeAll(async () => {
    panel = await startPanel({
      env: { TETHER_SECRETS_KEY: generateKey(), TETHER_ROUTING_DEBOUNCE_MS: '20', TETHER_SCHEDULER_INTERVAL_MS: '86400000' },
      logger: pino({ level: 'debug' }, sink),
    });
    const na = await panel.createNode('a');
    const nb = await panel.createNode('b');
    nodeIds.a = na.id;
    nodeIds.b = nb.id;
    a = await RawAgent.connect({ url: panel.url, token: na.token, node: 'a', capabilities: SHARING, privateAddress: '10.9.0.1', challengePort: 8080 });
    b = await RawAgent.connect({ url: panel.url, token: nb.token, node: 'b', capabilities: SHARING, privateAddress: '10.9.0.2', challengePort: 8080 });
    await panel.settled();
    // A routed service with a replica on each node, written as the scheduler and the agents' reports write it.
    const service = await panel.createService(na.id, 'shop');
    serviceId = service.id;
    await panel.prisma.service.update({ where: { id: serviceId }, data: { internalPort: 8080, replicas: 2 } });
    const release = await panel.prisma.deployment.create({ data: { serviceId, nodeId: na.id, spec: { name: 'shop' }, status: 'running' } });
    routeId = (await panel.prisma.route.create({ data: { domain: DOMAIN, pathPrefix: null, serviceId } })).id;
    for (const [node, endpoint] of [
      [na.id, '10.9.0.1:32001'],
      [nb.id, '10.9.0.2:32002'],
    ] as const) {
      await panel.prisma.allocation.create({
        data: { serviceId, nodeId: node, releaseId: release.id, cause: 'scale-up', epoch: 1n, desired: 'run', status: { state: 'running', health: 'healthy', endpoint } },
      });
    }
    panel.events.emit('routing.changed', { nodeIds: [na.id, nb.id], reason: 'test: service routed' });
  }, 60_000);

  afterAll(async () => {
    a?.close();
    b?.close();
    await panel?.close();
  });

  const routeOf = (agent: RawAgent) =>
    agent.waitFor<Extract<PanelMessage, { type: 'routing.map' }>>((m) => m.type === 'routing.map' && m.routes.some((r) => r.domain === DOMAIN), 10_000).then((m) => m.routes.find((r) => r.domain === DOMAIN) as Route);

  it("names the first sharing node by name as the issuer in the other node's map, with its challenge endpoint", async () => {
    expect((await routeOf(a)).certificateIssuer).toBeUndefined();
    expect((await routeOf(b)).certificateIssuer).toEqual({ node: 'a', challengeVia: '10.9.0.1:8080' });
    const rows = await sqlOf(panel.prisma).rows<{ issuer_node_id: string; certificate_pem: string | null }>(`SELECT issuer_node_id, certificate_pem FROM domain_certificates WHERE domain = $1`, [DOMAIN]);
    expect(rows).toEqual([{ issuer_node_id: nodeIds.a, certificate_pem: null }]);
    const node = await sqlOf(panel.prisma).rows<{ challenge_port: number }>(`SELECT challenge_port FROM nodes WHERE id = $1`, [nodeIds.b]);
    expect(node[0]!.challenge_port).toBe(8080);
  });

  it('refuses a report from a node that is not the issuer, and a certificate that is not its key', async () => {
    b.send({ type: 'certificates.report', id: 'rep-b', certificates: [report(other)] });
    const refused = await b.waitFor<Extract<PanelMessage, { type: 'error' }>>((m) => m.type === 'error' && m.ref === 'rep-b');
    expect(refused.code).toBe('CERTIFICATE_NOT_ISSUER');
    a.send({ type: 'certificates.report', id: 'rep-mixed', certificates: [report({ certificatePem: other.certificatePem, keyPem: planted.keyPem })] });
    const invalid = await a.waitFor<Extract<PanelMessage, { type: 'error' }>>((m) => m.type === 'error' && m.ref === 'rep-mixed');
    expect(invalid.code).toBe('CERTIFICATE_INVALID');
    expect(leaks(invalid.message)).toEqual([]);
  });

  it("stores the issuer's certificate, ACKs it, and sends it with its key to the other serving node", async () => {
    const started = performance.now();
    a.send({ type: 'certificates.report', id: 'rep-a', certificates: [report(planted)] });
    await a.waitFor((m) => m.type === 'ack' && m.ref === 'rep-a');
    const sent = await b.waitFor<Extract<PanelMessage, { type: 'certificates' }>>((m) => m.type === 'certificates' && m.certificates.length === 1, 10_000);
    console.log(`certificate reported by a reached b in ${(performance.now() - started).toFixed(0)} ms`);
    expect(sent.certificates[0]).toMatchObject({ domain: DOMAIN, certificatePem: planted.certificatePem, keyPem: planted.keyPem });
    // The issuer serves its own: it is never sent one.
    expect(a.received.filter((m) => m.type === 'certificates').every((m) => m.type === 'certificates' && m.certificates.length === 0)).toBe(true);
  });

  it('keeps the key write-only: no API answer, log line, audit row or stored column holds it', async () => {
    for (const url of ['/v1/routes', `/v1/routes/${routeId}`, '/v1/status', '/v1/sessions', '/v1/nodes', `/v1/nodes/${nodeIds.a}/sessions`, `/v1/services/${serviceId}`]) {
      const res = await panel.api('GET', url);
      answers.push(JSON.stringify(res.body));
      statuses.push(`${url} ${res.status}`);
    }
    // The answers searched are real ones (the route's own names the domain and its serving nodes).
    expect(statuses.filter((s) => !s.endsWith(' 200'))).toEqual([]);
    expect(answers.join('\n')).toContain(DOMAIN);
    const audit = await sqlOf(panel.prisma).rows<Record<string, unknown>>(`SELECT * FROM audit_events`);
    const row = await sqlOf(panel.prisma).rows<{ certificate_pem: string; key_ciphertext: Buffer; not_after: Date }>(`SELECT * FROM domain_certificates WHERE domain = $1`, [DOMAIN]);
    expect(row[0]!.certificate_pem).toBe(planted.certificatePem);
    expect(row[0]!.not_after.getTime()).toBeGreaterThan(Date.now());
    expect(log).toContain('certificates stored');
    expect(leaks(answers.join('\n'))).toEqual([]);
    expect(leaks(log)).toEqual([]);
    expect(leaks(JSON.stringify(audit))).toEqual([]);
    expect(leaks(JSON.stringify(row, (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString('hex') : v)))).toEqual([]);
    expect(leaks(row[0]!.key_ciphertext.toString('latin1'))).toEqual([]);
  });
});

describe('certificates.share on a panel without a secrets key', () => {
  it('is not confirmed, and the panel says why once at start; a report is refused, not a crash', async () => {
    let log = '';
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        log += chunk.toString('utf8');
        done();
      },
    });
    const panel = await startPanel({ logger: pino({ level: 'info' }, sink) });
    try {
      const node = await panel.createNode('lone');
      const agent = await RawAgent.connect({ url: panel.url, token: node.token, node: 'lone', capabilities: SHARING, privateAddress: '10.9.0.9', challengePort: 8080 });
      expect(agent.welcome.capabilities).toContain(CAPABILITIES.ROUTING_REMOTE);
      expect(agent.welcome.capabilities).not.toContain(CAPABILITIES.CERTIFICATES_SHARE);
      expect(log.match(/CERTIFICATES_NOT_SHARED/g)).toHaveLength(1);
      expect(log).toContain('certificates are not shared between nodes: this panel has no secrets key');
      agent.send({ type: 'certificates.report', id: 'rep-x', certificates: [report(planted)] });
      const refused = await agent.waitFor<Extract<PanelMessage, { type: 'error' }>>((m) => m.type === 'error' && m.ref === 'rep-x');
      expect(refused.code).toBe('UNEXPECTED_MESSAGE');
      expect(agent.closed).toBeNull();
      agent.close();
    } finally {
      await panel.close();
    }
  });
});
