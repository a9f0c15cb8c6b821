import type { Logger } from '@tether/common';
import { CAPABILITIES, type CertificatesReport, type ErrorMessage, type SharedCertificate } from '@tether/protocol';
import type { CertificateSharing, IssuedCertificate } from '../controllers.js';

// The session's side of certificates.share (docs/protocol.md): what the proxy
// obtained for domains this node issues goes to the panel in
// `certificates.report`, at most 10 a message, and counts as reported only on
// the panel's ACK, or its refusal (an error naming the report: this node is not
// the issuer, or the panel cannot store keys; it goes again when it changes or
// on the next session). Run from the heartbeat loop and at each welcome.

const BATCH = 10;

export class CertificateReporter {
  private enabled = false;
  private ackTimeoutMs = 0;
  /** Reports in flight: message id → what it carries, and when it was sent. */
  private readonly inFlight = new Map<string, { issued: IssuedCertificate[]; at: number }>();
  /** One look at the proxy's storage at a time (a slow disk must not stack them up). */
  private running = false;

  constructor(
    private readonly sharing: CertificateSharing,
    private readonly nextId: () => string,
    private readonly logger: Logger,
  ) {}

  sessionReady(capabilities: readonly string[], ackTimeoutMs: number): void {
    this.enabled = capabilities.includes(CAPABILITIES.CERTIFICATES_SHARE);
    this.ackTimeoutMs = ackTimeoutMs;
    this.inFlight.clear();
    // A panel of a new session may have lost what an earlier one was sent.
    this.sharing.forgetReported();
  }

  sessionClosed(): void {
    this.enabled = false;
    this.inFlight.clear();
  }

  /** Sends what the panel has not stored and no report in flight carries; `send` returns false when the socket cannot take it. */
  async flush(send: (message: CertificatesReport) => boolean): Promise<void> {
    if (!this.enabled || this.running) return;
    this.running = true;
    try {
      const now = Date.now();
      for (const [id, sent] of this.inFlight) if (now - sent.at > this.ackTimeoutMs) this.inFlight.delete(id);
      const carried = new Set([...this.inFlight.values()].flatMap((m) => m.issued.map((i) => `${i.certificate.domain}\0${i.stamp}`)));
      const waiting = (await this.sharing.unreported()).filter((i) => !carried.has(`${i.certificate.domain}\0${i.stamp}`));
      for (let i = 0; i < waiting.length && this.enabled; i += BATCH) {
        const issued = waiting.slice(i, i + BATCH);
        const id = this.nextId();
        const certificates: SharedCertificate[] = issued.map((x) => x.certificate);
        if (!send({ type: 'certificates.report', id, certificates })) return;
        this.inFlight.set(id, { issued, at: Date.now() });
        // The domains only: a key is never logged.
        this.logger.info({ domains: certificates.map((c) => c.domain) }, 'certificates reported to the panel');
      }
    } finally {
      this.running = false;
    }
  }

  /** An ACK arrived; true when it answered a report. */
  acknowledged(ref: string): boolean {
    const sent = this.inFlight.get(ref);
    if (!sent) return false;
    this.inFlight.delete(ref);
    this.sharing.markReported(sent.issued);
    return true;
  }

  /** The panel refused a report: not sent again until it changes (or a new session). True when it named one. */
  refused(error: ErrorMessage): boolean {
    const sent = error.ref === null ? undefined : this.inFlight.get(error.ref);
    if (!sent) return false;
    this.inFlight.delete(error.ref!);
    this.sharing.markReported(sent.issued);
    this.logger.warn({ code: error.code, domains: sent.issued.map((i) => i.certificate.domain), reason: error.message }, 'the panel refused a certificates report');
    return true;
  }
}
