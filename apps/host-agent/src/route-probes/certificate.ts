import { X509Certificate } from 'node:crypto';
import type { RouteCertificate } from '@tether/protocol';

// A peer certificate in the words docs/api.md uses: the issuer as RFC 4514
// (most specific attribute first, special characters escaped), validity as
// ISO 8601, the serial as lowercase hex without colons or leading zeros.

const escape4514 = (value: string) =>
  value
    .replace(/[\\,+"<>;=]/g, (c) => `\\${c}`)
    .replace(/^[ #]/, (c) => `\\${c}`)
    .replace(/ $/, '\\ ');

/** `C=US\nO=Org\nCN=Name` (OpenSSL's order, one attribute a line) as RFC 4514: `CN=Name,O=Org,C=US`. */
export function rfc4514(name: string): string {
  return name
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => {
      const eq = l.indexOf('=');
      return `${l.slice(0, eq)}=${escape4514(l.slice(eq + 1))}`;
    })
    .reverse()
    .join(',');
}

export function describeCertificate(raw: Buffer): Omit<RouteCertificate, 'lastError'> {
  const cert = new X509Certificate(raw);
  return {
    issuer: rfc4514(cert.issuer),
    notBefore: new Date(cert.validFrom).toISOString(),
    notAfter: new Date(cert.validTo).toISOString(),
    serial: cert.serialNumber.toLowerCase().replace(/:/g, '').replace(/^0+(?=.)/, ''),
  };
}
