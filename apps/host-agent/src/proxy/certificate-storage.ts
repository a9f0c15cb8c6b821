import { X509Certificate, createPrivateKey } from 'node:crypto';
import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { SharedCertificate } from '@tether/protocol';
import { readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';
import type { StaticRenderOptions } from './static-render.js';

// Where Caddy 2.6.2 (certmagic's file storage) keeps a certificate it obtained,
// read by the issuer to report it and written by the other serving nodes so
// their Caddy finds it (docs/architecture.md, "Certificates on several nodes"):
// `<root>/certificates/<issuer key>/<domain>/<domain>.{crt,key,json}`. On a
// cache miss on-demand TLS loads a certificate from there before it asks
// `ask` or the CA (measured on 2.6.2), so a shared certificate serves as soon
// as its three files are in place.

/** certmagic's ACME issuer key (issuerKey + safeKey): the CA URL's host and path, `/` and `:` as `-`. */
export function caddyIssuerKey(o: Pick<StaticRenderOptions, 'issuer' | 'acmeCa'>): string {
  // Caddy's internal issuer keeps its certificates under its CA's id.
  if (o.issuer === 'internal') return 'local';
  const url = new URL(o.acmeCa ?? 'https://acme-v02.api.letsencrypt.org/directory');
  const trimmedPath = url.pathname.replace(/[/\\]/g, '-').replace(/^-+|-+$/g, '');
  const key = trimmedPath === '' ? url.host : `${url.host}-${trimmedPath}`;
  return key.toLowerCase().replace(/:/g, '-');
}

export interface CertificateFiles {
  crt: string;
  key: string;
  json: string;
}

export function certificateFiles(root: string, issuerKey: string, domain: string): CertificateFiles {
  const dir = path.join(root, 'certificates', issuerKey, domain);
  return { crt: path.join(dir, `${domain}.crt`), key: path.join(dir, `${domain}.key`), json: path.join(dir, `${domain}.json`) };
}

/** The leaf's notAfter as ISO 8601, or null when the PEM holds no certificate Node can read. */
export function leafNotAfter(certificatePem: string): string | null {
  try {
    return new Date(new X509Certificate(certificatePem).validTo).toISOString();
  } catch {
    return null;
  }
}

/** The certificate Caddy stored for `domain`, with its file's modification stamp; null while none is (or it is unreadable). */
export async function readStoredCertificate(root: string, issuerKey: string, domain: string): Promise<{ certificate: SharedCertificate; stamp: string } | null> {
  const files = certificateFiles(root, issuerKey, domain);
  const [crt, key, info] = await Promise.all([readFileIfExists(files.crt), readFileIfExists(files.key), stat(files.crt).catch(() => null)]);
  if (crt === null || key === null || info === null) return null;
  const certificatePem = crt.toString('utf8');
  const notAfter = leafNotAfter(certificatePem);
  if (notAfter === null) return null;
  return { certificate: { domain, certificatePem, keyPem: key.toString('utf8'), notAfter }, stamp: `${info.mtimeMs}:${info.size}` };
}

/**
 * Writes a certificate another node issued where Caddy looks for it: key and metadata first, the chain last (the
 * file a load starts from), each atomically; the key readable by its owner only. Refuses a chain whose leaf does
 * not name the domain or a key that does not parse, so a bad frame never replaces a working certificate.
 */
export async function writeSharedCertificate(root: string, issuerKey: string, certificate: SharedCertificate): Promise<void> {
  const leaf = new X509Certificate(certificate.certificatePem);
  if (!leaf.checkHost(certificate.domain)) throw new Error(`the certificate for ${certificate.domain} does not name it`);
  if (!leaf.checkPrivateKey(createPrivateKey(certificate.keyPem))) throw new Error(`the key sent for ${certificate.domain} is not the certificate's`);
  const files = certificateFiles(root, issuerKey, certificate.domain);
  await mkdir(path.dirname(files.crt), { recursive: true, mode: 0o700 });
  await writeFileAtomic(files.key, certificate.keyPem, 0o600);
  // certmagic reads `sans` from the metadata; issuer_data is only for revocation, which stays with the issuer.
  await writeFileAtomic(files.json, `${JSON.stringify({ sans: [certificate.domain], issuer_data: null })}\n`, 0o600);
  await writeFileAtomic(files.crt, certificate.certificatePem, 0o644);
}

/** Whether the certificate in place for `domain` is the one given (same chain): nothing to write then. */
export async function storedCertificateIs(root: string, issuerKey: string, certificate: SharedCertificate): Promise<boolean> {
  const crt = await readFileIfExists(certificateFiles(root, issuerKey, certificate.domain).crt);
  return crt !== null && crt.toString('utf8') === certificate.certificatePem;
}
