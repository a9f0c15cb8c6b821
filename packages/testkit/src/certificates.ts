import { execFileSync } from 'node:child_process';

// What a certificate test compares a route's certificate with: the
// certificate a proxy serves as `openssl s_client` sees it.

/** The served certificate's issuer (RFC 2253/4514), serial (lowercase hex, no leading zeros) and validity (ISO 8601). */
export function opensslView(port: number, servername: string): { issuer: string; serial: string; notBefore: string; notAfter: string } {
  const out = execFileSync('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', servername], { input: '', encoding: 'utf8', stdio: ['pipe', 'pipe', 'ignore'] });
  const pem = out.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/)![0];
  const text = execFileSync('openssl', ['x509', '-noout', '-issuer', '-serial', '-startdate', '-enddate', '-nameopt', 'RFC2253'], { input: pem, encoding: 'utf8' });
  const field = (name: string) => text.match(new RegExp(`^${name}=(.*)$`, 'm'))![1]!.trim();
  return {
    issuer: field('issuer'),
    serial: field('serial').toLowerCase().replace(/^0+(?=.)/, ''),
    notBefore: new Date(field('notBefore')).toISOString(),
    notAfter: new Date(field('notAfter')).toISOString(),
  };
}
