import type { Logger } from '@tether/common';
import { CAPABILITIES, createIdGenerator, type CertificatesReport, type Route } from '@tether/protocol';
import { sqlOf, type Db } from '../db/database.js';
import type { PanelEvents } from '../panel-events.js';
import type { Keyring } from '../secrets/keyring.js';
import { certificatesFingerprint, openCertificates, storeCertificate } from '../secrets/certificate-store.js';
import type { AgentSession } from '../sessions/session.js';
import { servingNodes } from './serving-nodes.js';

// One certificate issuer per domain, the panel's part (capability
// certificates.share, docs/architecture.md "Certificates on several nodes"):
// what an issuer reports is stored (secrets/certificate-store.ts) and ACKed,
// and every other node serving the domain is sent the complete set of
// certificates its map names another issuer for, on each routing push whose
// set differs from the one its session last ACKed. A stored certificate that
// changed makes its domain's nodes' routing `changed` (the event the cluster
// forwards to the panel holding each session), so it reaches them at once.
//
// Written straight in one transaction, not through the session-fact outbox:
// the outbox spills to a file while the database is away, and a key has no
// place in a file; the agent keeps a report until it is ACKed, so nothing is
// lost when the write fails.

export class CertificateRelay {
  private readonly nextId = createIdGenerator('c');
  /** Per session, the fingerprint of the set it last ACKed. */
  private readonly sent = new WeakMap<AgentSession, string>();
  /** Per node, reports stored one at a time, in arrival order. */
  private readonly queue = new Map<string, Promise<void>>();

  constructor(
    private readonly options: {
      prisma: Db;
      /** Null: no secrets key, so certificates.share is never confirmed and nothing is stored or sent. */
      keyring: Keyring | null;
      events: PanelEvents;
      logger: Logger;
    },
  ) {
    if (!options.keyring) {
      options.logger.warn(
        { code: 'CERTIFICATES_NOT_SHARED' },
        'certificates are not shared between nodes: this panel has no secrets key (TETHER_SECRETS_KEY or TETHER_SECRETS_KEY_FILE); every node serving a domain orders its own certificate',
      );
    }
  }

  /** Whether this panel confirms certificates.share (it can seal a certificate's key). */
  get enabled(): boolean {
    return this.options.keyring !== null;
  }

  /** certificates.report: each certificate stored when the session's node is its domain's issuer; ACKed when all were, else refused. */
  received(session: AgentSession, message: CertificatesReport): void {
    const next = (this.queue.get(session.nodeId) ?? Promise.resolve())
      .then(() => this.store(session, message))
      .catch((err: unknown) => this.options.logger.warn({ err, node: session.nodeName }, 'certificates report not stored; the agent sends it again'));
    this.queue.set(session.nodeId, next);
    void next.finally(() => {
      if (this.queue.get(session.nodeId) === next) this.queue.delete(session.nodeId);
    });
  }

  /** Waits for the reports being stored (tests, stop). */
  async idle(): Promise<void> {
    await Promise.all([...this.queue.values()]);
  }

  private async store(session: AgentSession, message: CertificatesReport): Promise<void> {
    const keyring = this.options.keyring;
    const refuse = (code: string, reason: string) =>
      void session.send({ type: 'error', id: this.nextId(), ref: message.id, code, message: reason.slice(0, 1_000) });
    if (!keyring) return refuse('CERTIFICATES_NOT_SHARED', 'this panel has no secrets key: certificates are not shared');
    const changed: string[] = [];
    const refused: { code: string; reason: string }[] = [];
    for (const certificate of message.certificates) {
      const outcome = await storeCertificate(this.options.prisma, keyring, session.nodeId, certificate);
      if (!outcome.stored) refused.push(outcome);
      else if (outcome.changed) changed.push(certificate.domain);
    }
    // The domain and why, never the certificate or its key.
    if (refused.length > 0) {
      this.options.logger.warn({ node: session.nodeName, refused }, 'certificates report refused in part');
      refuse(refused[0]!.code, refused.map((r) => r.reason).join('; '));
    } else {
      session.send({ type: 'ack', id: this.nextId(), ref: message.id });
    }
    if (changed.length === 0) return;
    this.options.logger.info({ node: session.nodeName, domains: changed }, 'certificates stored');
    const nodeIds = await this.otherServingNodes(changed, session.nodeId);
    if (nodeIds.length > 0) this.options.events.emit('routing.changed', { nodeIds, reason: `certificate of ${changed.join(', ')} stored` });
  }

  /** The nodes serving any of `domains`, `issuer` left out. */
  private async otherServingNodes(domains: readonly string[], issuer: string): Promise<string[]> {
    const sql = sqlOf(this.options.prisma);
    const services = await sql.rows<{ service_id: string }>(`SELECT DISTINCT service_id FROM routes WHERE domain = ANY($1::text[])`, [domains]);
    const serving = await servingNodes(sql, services.map((s) => s.service_id));
    return [...new Set(serving.map((s) => s.node_id))].filter((id) => id !== issuer).sort();
  }

  /**
   * After a routing push: the certificates of the domains `routes` name another issuer for, when the set differs
   * from the one the session last ACKed (keys opened only into this frame).
   */
  async push(session: AgentSession, routes: readonly Route[]): Promise<void> {
    const keyring = this.options.keyring;
    if (!keyring || !session.hasCapability(CAPABILITIES.CERTIFICATES_SHARE)) return;
    const domains = [...new Set(routes.filter((r) => r.certificateIssuer !== undefined).map((r) => r.domain))].sort();
    const fingerprint = await certificatesFingerprint(this.options.prisma, domains);
    if (this.sent.get(session) === fingerprint) return;
    const { certificates, unreadable } = await openCertificates(this.options.prisma, keyring, domains);
    if (unreadable.length > 0) this.options.logger.warn({ node: session.nodeName, unreadable }, 'stored certificates that do not open are not sent');
    await session.sendAwaitingAck({ type: 'certificates', id: this.nextId(), certificates });
    this.sent.set(session, fingerprint);
    this.options.logger.info({ node: session.nodeName, domains: certificates.map((c) => c.domain) }, 'certificates sent');
  }
}
