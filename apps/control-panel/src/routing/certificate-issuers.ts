import type { CertificateIssuer } from '@tether/protocol';

// One certificate issuer per domain (capability certificates.share; docs/
// architecture.md, "Certificates on several nodes"). Let's Encrypt issues at
// most five duplicate certificates a week, so a domain served by more nodes
// than that cannot have each of them order its own. Pure: the routing maps
// ask it with the domain's serving nodes and the issuer stored for it.

/** A node serving a domain, as the choice needs it. */
export interface IssuerCandidate {
  name: string;
  /** Its agent and this panel both speak certificates.share. */
  shares: boolean;
  /** Its session is live. */
  live: boolean;
  privateAddress: string | null;
  /** hello.challengePort: its proxy's plain HTTP port at its private address. */
  challengePort: number | null;
}

/** Whether a node can issue for the others: it shares, is live, and the CA's challenges can be forwarded to it. */
function eligible(c: IssuerCandidate): boolean {
  return c.shares && c.live && c.privateAddress !== null && c.challengePort !== null;
}

/**
 * The domain's issuer: the current one while it still serves the domain and is eligible (a move costs a new
 * certificate), otherwise the first eligible node by name; null when none is (every node then orders its own, as
 * before the capability).
 */
export function chooseIssuer(serving: readonly IssuerCandidate[], current: string | null): string | null {
  const kept = current === null ? undefined : serving.find((c) => c.name === current && eligible(c));
  if (kept) return kept.name;
  const names = serving.filter(eligible).map((c) => c.name).sort();
  return names[0] ?? null;
}

/** `address:port` as the protocol's endpoints write it (IPv6 in brackets). */
function endpointOf(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

/**
 * What a route of `node` for the domain carries: `certificateIssuer` only when the node shares and another node
 * issues; absent otherwise (the issuer itself, a node without the capability, a domain without an issuer), so such
 * a map hashes as it did before.
 */
export function certificateIssuerFor(node: IssuerCandidate, issuer: string | null, serving: readonly IssuerCandidate[]): CertificateIssuer | undefined {
  if (!node.shares || issuer === null || issuer === node.name) return undefined;
  const chosen = serving.find((c) => c.name === issuer);
  if (!chosen || chosen.privateAddress === null || chosen.challengePort === null) return undefined;
  return { node: issuer, challengeVia: endpointOf(chosen.privateAddress, chosen.challengePort) };
}
