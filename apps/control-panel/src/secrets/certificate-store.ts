import { X509Certificate, createPrivateKey } from 'node:crypto';
import type { SharedCertificate } from '@tether/protocol';
import { PanelError, type PanelErrorCode } from '../errors.js';
import { sqlOf, type Db } from '../db/database.js';
import { prismaSql } from '../db/sql.js';
import type { Keyring } from './keyring.js';

// Domain certificates in the database (capability certificates.share,
// docs/architecture.md "Certificates on several nodes"): the chain in the
// clear, its private key sealed under the secrets keyring exactly as a
// service secret is (keyring.seal, bound to the domain, so a row copied to
// another domain does not open). A plain key exists only in memory, on its
// way in from the issuer's report and on its way out in a `certificates`
// frame to another node serving the domain.

export const certificateAad = (domain: string) => `tether-certificate-key\0${domain}`;

/** Why a reported certificate is not stored; null when it may be. */
export function certificateProblem(c: SharedCertificate, now = new Date()): string | null {
  try {
    const leaf = new X509Certificate(c.certificatePem);
    if (!leaf.checkHost(c.domain)) return `the certificate does not name ${c.domain}`;
    if (!leaf.checkPrivateKey(createPrivateKey(c.keyPem))) return `the key is not the certificate's`;
    if (new Date(leaf.validTo).getTime() <= now.getTime()) return `the certificate expired at ${new Date(leaf.validTo).toISOString()}`;
    return null;
  } catch {
    // The parser's message may quote the input: never echoed.
    return 'the certificate or the key does not parse';
  }
}

/** The leaf's notAfter, read from the chain itself (the report's own field is not trusted). */
const notAfterOf = (certificatePem: string) => new Date(new X509Certificate(certificatePem).validTo);

export type StoreOutcome = { stored: true; changed: boolean } | { stored: false; code: PanelErrorCode; reason: string };

/**
 * Stores a certificate `nodeId` reported, when that node is the domain's issuer now (the row locked, so an issuer
 * moving at the same time is seen). `changed`: the chain differs from the one stored (the other serving nodes get it).
 */
export async function storeCertificate(db: Db, keyring: Keyring, nodeId: string, c: SharedCertificate): Promise<StoreOutcome> {
  const problem = certificateProblem(c);
  if (problem) return { stored: false, code: 'CERTIFICATE_INVALID', reason: `${c.domain}: ${problem}` };
  return db.$transaction(async (tx) => {
    const sql = prismaSql(tx);
    const [row] = await sql.rows<{ issuer_node_id: string; certificate_pem: string | null }>(
      `SELECT issuer_node_id, certificate_pem FROM domain_certificates WHERE domain = $1 FOR UPDATE`,
      [c.domain],
    );
    if (!row || row.issuer_node_id !== nodeId) return { stored: false, code: 'CERTIFICATE_NOT_ISSUER', reason: `${c.domain}: this node is not its certificate issuer` } as const;
    if (row.certificate_pem === c.certificatePem) return { stored: true, changed: false } as const;
    const sealed = keyring.seal(c.keyPem, certificateAad(c.domain));
    await sql.run(
      `UPDATE domain_certificates SET certificate_pem = $2, key_id = $3, key_nonce = $4, key_ciphertext = $5, not_after = $6, updated_at = now() WHERE domain = $1`,
      [c.domain, c.certificatePem, sealed.keyId, Buffer.from(sealed.nonce), Buffer.from(sealed.ciphertext), notAfterOf(c.certificatePem)],
    );
    return { stored: true, changed: true } as const;
  });
}

/** A stable fingerprint of the certificates stored for `domains` (the chains only: no key is opened to compare). */
export async function certificatesFingerprint(db: Db, domains: readonly string[]): Promise<string> {
  if (domains.length === 0) return '';
  const [row] = await sqlOf(db).rows<{ f: string | null }>(
    `SELECT string_agg(domain || ':' || md5(certificate_pem), ',' ORDER BY domain) AS f
    FROM domain_certificates WHERE domain = ANY($1::text[]) AND certificate_pem IS NOT NULL`,
    [domains],
  );
  return row?.f ?? '';
}

/**
 * The certificates stored for `domains`, keys opened. One under a key this panel was not given, or that does not
 * authenticate, is left out and named in `unreadable` (never its content): its domain's node keeps what it has.
 */
export async function openCertificates(
  db: Db,
  keyring: Keyring,
  domains: readonly string[],
): Promise<{ certificates: SharedCertificate[]; unreadable: { domain: string; code: string }[] }> {
  const certificates: SharedCertificate[] = [];
  const unreadable: { domain: string; code: string }[] = [];
  if (domains.length === 0) return { certificates, unreadable };
  const rows = await sqlOf(db).rows<{ domain: string; certificate_pem: string; key_id: string; key_nonce: Uint8Array; key_ciphertext: Uint8Array; not_after: Date }>(
    `SELECT domain, certificate_pem, key_id, key_nonce, key_ciphertext, not_after FROM domain_certificates
    WHERE domain = ANY($1::text[]) AND certificate_pem IS NOT NULL ORDER BY domain`,
    [domains],
  );
  for (const r of rows) {
    try {
      const keyPem = keyring.open({ keyId: r.key_id, nonce: r.key_nonce, ciphertext: r.key_ciphertext }, certificateAad(r.domain));
      certificates.push({ domain: r.domain, certificatePem: r.certificate_pem, keyPem, notAfter: r.not_after.toISOString() });
    } catch (err) {
      if (!(err instanceof PanelError)) throw err;
      unreadable.push({ domain: r.domain, code: err.code });
    }
  }
  return { certificates, unreadable };
}
