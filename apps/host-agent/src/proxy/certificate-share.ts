import { canonicalRoutes, type Route, type SharedCertificate } from '@tether/protocol';
import type { Logger } from '@tether/common';
import { readStoredCertificate, storedCertificateIs, writeSharedCertificate } from './certificate-storage.js';

// One certificate issuer per domain (capability certificates.share,
// docs/architecture.md "Certificates on several nodes"). On the issuer this
// finds what its Caddy obtained (new or renewed) for the panel; elsewhere it
// puts what the panel sent into Caddy's storage and says which domains are
// in place, the only ones such a node's `ask` allows.

export interface CertificateShareOptions {
  /** Caddy's storage folder as the agent sees it. */
  storageRoot: string;
  /** certmagic's issuer key of this Caddy's issuer (certificate-storage.ts caddyIssuerKey). */
  issuerKey: string;
  logger: Logger;
}

export type { IssuedCertificate } from '../controllers.js';
import type { IssuedCertificate } from '../controllers.js';

/** The domains of `routes` whose certificate this node obtains itself (no route names another issuer). */
export function issuedHere(routes: readonly Route[]): string[] {
  const elsewhere = new Set(routes.filter((r) => r.certificateIssuer !== undefined).map((r) => r.domain));
  return [...new Set(canonicalRoutes(routes).map((r) => r.domain))].filter((d) => !elsewhere.has(d));
}

export class CertificateShare {
  private readonly inPlace = new Set<string>();
  /** Stamp of the last certificate of each domain the panel ACKed. */
  private readonly reported = new Map<string, string>();

  constructor(private readonly options: CertificateShareOptions) {}

  /** Domains another node issues whose certificate is in Caddy's storage. */
  get sharedInPlace(): ReadonlySet<string> {
    return this.inPlace;
  }

  /**
   * The complete set of certificates this node serves for other issuers. Each is written unless the same one is
   * in place; one that cannot be written (or does not match its key and domain) stays out, logged without its key.
   * Returns whether the set in place changed (the answers then change: `ask` allows or refuses).
   */
  async install(certificates: readonly SharedCertificate[]): Promise<{ changed: boolean; failed: string[] }> {
    const { storageRoot, issuerKey } = this.options;
    const next = new Set<string>();
    const failed: string[] = [];
    for (const certificate of certificates) {
      try {
        if (!(await storedCertificateIs(storageRoot, issuerKey, certificate))) await writeSharedCertificate(storageRoot, issuerKey, certificate);
        next.add(certificate.domain);
      } catch (error) {
        failed.push(certificate.domain);
        this.options.logger.warn({ domain: certificate.domain, error: error instanceof Error ? error.message : String(error) }, 'shared certificate not installed');
      }
    }
    const changed = next.size !== this.inPlace.size || [...next].some((d) => !this.inPlace.has(d));
    this.inPlace.clear();
    for (const d of next) this.inPlace.add(d);
    return { changed, failed };
  }

  /** Certificates Caddy holds for `domains` (those this node issues) that the panel has not ACKed in this form. */
  async unreported(domains: readonly string[]): Promise<IssuedCertificate[]> {
    const found: IssuedCertificate[] = [];
    // A domain this node no longer issues is reported again if it becomes this node's once more.
    for (const domain of [...this.reported.keys()]) if (!domains.includes(domain)) this.reported.delete(domain);
    for (const domain of domains) {
      const stored = await readStoredCertificate(this.options.storageRoot, this.options.issuerKey, domain);
      if (stored !== null && this.reported.get(domain) !== stored.stamp) found.push(stored);
    }
    return found;
  }

  /** The panel stored these (its ACK): not sent again until their file changes. */
  markReported(issued: readonly IssuedCertificate[]): void {
    for (const i of issued) this.reported.set(i.certificate.domain, i.stamp);
  }

  /** A new session: the panel may have lost what it was sent, so everything is reported again. */
  forgetReported(): void {
    this.reported.clear();
  }
}
