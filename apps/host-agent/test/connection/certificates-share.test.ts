import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CAPABILITIES, DEFAULT_TIMING, type CertificatesReport, type Hello, type SharedCertificate } from '@tether/protocol';
import type { AnswererHealth, CertificateSharing, IssuedCertificate, RoutingController, WorkloadController } from '../../src/controllers.js';
import type { PanelConnection } from '../../src/connection/panel-connection.js';
import { agentCapabilities, challengePort } from '../../src/connection/handshake.js';
import { DisabledRouting, UnavailableWorkloads } from '../../src/null-controllers.js';
import { FakePanel, testConnection } from './fake-panel.js';

// Capability certificates.share over a real WebSocket against a scripted panel: announced with hello's
// challengePort only beside routing.remote and a proxy that shares; `certificates` ACKed at once and installed;
// what the proxy obtained reported at the welcome and on heartbeats until the panel ACKs it (or refuses it),
// and again on the next session. The proxy side is a fake here (its real test: route-probes/certificate-share).

const health: AnswererHealth = { up: true, starts: 1, restarts: 0, lastFailure: null, lastFailureAt: null, unserved: 0, legacy: 0 };
const cert = (domain: string): SharedCertificate => ({ domain, certificatePem: '-----BEGIN CERTIFICATE-----\nx\n', keyPem: '-----BEGIN PRIVATE KEY-----\ny\n', notAfter: '2027-01-01T00:00:00.000Z' });

class FakeSharing implements CertificateSharing {
  readonly challengePort = 8080;
  installed: SharedCertificate[][] = [];
  held: IssuedCertificate[] = [{ certificate: cert('a.example.test'), stamp: '1' }];
  reported = new Map<string, string>();
  install(certificates: readonly SharedCertificate[]) {
    this.installed.push([...certificates]);
    return Promise.resolve({ failed: [] });
  }
  unreported() {
    return Promise.resolve(this.held.filter((i) => this.reported.get(i.certificate.domain) !== i.stamp));
  }
  markReported(issued: readonly IssuedCertificate[]) {
    for (const i of issued) this.reported.set(i.certificate.domain, i.stamp);
  }
  forgetReported() {
    this.reported.clear();
  }
}

const sharingRouting = (sharing: CertificateSharing | undefined): RoutingController => Object.assign(new DisabledRouting(), { answerer: () => health, certificateSharing: sharing });
const remoteWorkloads = (): WorkloadController =>
  Object.assign(new UnavailableWorkloads(), { capabilities: [CAPABILITIES.WORKLOAD_ALLOCATIONS], privateAddress: '10.20.0.7', setAllocations: () => undefined, allocationStatus: () => null });

describe('certificates.share in hello', () => {
  it('announced with the challenge port only beside routing.remote and a proxy that shares', () => {
    const all = { routing: sharingRouting(new FakeSharing()), workloads: remoteWorkloads() };
    expect(challengePort(all)).toBe(8080);
    expect(agentCapabilities(all)).toContain(CAPABILITIES.CERTIFICATES_SHARE);
    for (const parts of [
      { routing: sharingRouting(undefined), workloads: remoteWorkloads() },
      { routing: sharingRouting(new FakeSharing()), workloads: new UnavailableWorkloads() },
    ]) {
      expect(challengePort(parts)).toBeNull();
      expect(agentCapabilities(parts)).not.toContain(CAPABILITIES.CERTIFICATES_SHARE);
    }
  });
});

describe('certificates.share over the session', () => {
  let panel = new FakePanel();
  let connection: PanelConnection | undefined;
  beforeEach(() => {
    panel = new FakePanel();
  });
  afterEach(async () => {
    await connection?.stop();
    await panel.stop();
  });

  /** An agent whose proxy shares certificates through `sharing`, on the fake panel, with fast reconnects and heartbeats. */
  const sharingConnection = async (sharing: FakeSharing) =>
    testConnection(await panel.start(), {
      workloads: remoteWorkloads(),
      routing: sharingRouting(sharing),
      reconnect: { minMs: 20, maxMs: 50, healthySessionMs: 300, connectTimeoutMs: 1_000 },
      overrides: { heartbeatIntervalMs: 50 },
    });

  it('installs what the panel sends, reports what the proxy obtained until ACKed, and again on a new session', async () => {
    panel.autoWelcome = null;
    const sharing = new FakeSharing();
    connection = await sharingConnection(sharing);
    connection.start();
    const open = async (n: number) => {
      const conn = await panel.waitForConnection(n);
      const hello = await conn.waitFor<Hello>((m) => m.type === 'hello');
      expect(hello.capabilities).toContain(CAPABILITIES.CERTIFICATES_SHARE);
      expect(hello.challengePort).toBe(8080);
      conn.send({ type: 'welcome', id: `w${n}`, ref: hello.id, sessionId: `ses_${n}`, nodeId: 'node_1', timing: DEFAULT_TIMING, capabilities: hello.capabilities! });
      return conn;
    };
    const first = await open(1);
    first.send({ type: 'certificates', id: 'pc_1', certificates: [cert('b.example.test')] });
    await first.waitFor((m) => m.type === 'ack' && m.ref === 'pc_1');
    await expect.poll(() => sharing.installed.length).toBe(1);
    expect(sharing.installed[0]!.map((c) => c.domain)).toEqual(['b.example.test']);

    // Sent at the welcome, again on heartbeats while unACKed only once its ACK is overdue; not after the ACK.
    const reported = await first.waitFor<CertificatesReport>((m) => m.type === 'certificates.report');
    expect(reported.certificates.map((c) => c.domain)).toEqual(['a.example.test']);
    first.send({ type: 'ack', id: 'pa_1', ref: reported.id });
    await expect.poll(() => sharing.reported.get('a.example.test')).toBe('1');
    await new Promise((r) => setTimeout(r, 300));
    expect(first.received.filter((m) => m.type === 'certificates.report')).toHaveLength(1);

    // A renewal is reported; the panel refuses it (another node issues now): not sent again on this session.
    sharing.held = [{ certificate: cert('a.example.test'), stamp: '2' }];
    const renewed = await first.waitFor<CertificatesReport>((m) => m.type === 'certificates.report' && m.id !== reported.id);
    first.send({ type: 'error', id: 'pe_1', ref: renewed.id, code: 'CERTIFICATE_NOT_ISSUER', message: 'a.example.test: this node is not its certificate issuer' });
    await new Promise((r) => setTimeout(r, 300));
    expect(first.received.filter((m) => m.type === 'certificates.report')).toHaveLength(2);

    // A new session reports it again.
    first.socket.terminate();
    const second = await open(2);
    const again = await second.waitFor<CertificatesReport>((m) => m.type === 'certificates.report');
    expect(again.certificates.map((c) => c.domain)).toEqual(['a.example.test']);
  });

  it('a panel that did not confirm the capability gets no report, and its certificates frame is refused', async () => {
    const sharing = new FakeSharing();
    connection = await sharingConnection(sharing);
    connection.start();
    const conn = await panel.waitForConnection(1);
    await conn.waitFor((m) => m.type === 'heartbeat');
    conn.send({ type: 'certificates', id: 'pc_x', certificates: [cert('b.example.test')] });
    const refused = await conn.waitFor((m) => m.type === 'error' && m.ref === 'pc_x');
    expect(refused).toMatchObject({ code: 'UNEXPECTED_MESSAGE' });
    await new Promise((r) => setTimeout(r, 200));
    expect(conn.received.filter((m) => m.type === 'certificates.report')).toEqual([]);
    expect(sharing.installed).toEqual([]);
  });
});
