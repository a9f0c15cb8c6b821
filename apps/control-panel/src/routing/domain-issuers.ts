import { CAPABILITIES } from '@tether/protocol';
import type { Sql } from '../db/sql.js';
import { chooseIssuer, type IssuerCandidate } from './certificate-issuers.js';
import { servingNodes } from './serving-nodes.js';

// The issuer of each domain as the routing maps name it (capability
// certificates.share): chosen by certificate-issuers.ts from the nodes serving
// the domain's routes (serving-nodes.ts, the same nodes its maps go to) and
// recorded in domain_certificates, so it stays put while it is eligible (a move
// costs a new order) and every panel names the same one.

export interface DomainIssuer {
  issuer: string | null;
  /** The domain's serving nodes, by name. */
  serving: IssuerCandidate[];
}

interface NodeRow {
  id: string;
  name: string;
  shares: boolean;
  live: boolean;
  private_address: string | null;
  challenge_port: number | null;
}

/** The issuer and serving nodes of each of `domains`; a choice that differs from the recorded one is recorded. */
export async function domainIssuers(sql: Sql, domains: readonly string[]): Promise<Map<string, DomainIssuer>> {
  const out = new Map<string, DomainIssuer>();
  if (domains.length === 0) return out;
  const routes = await sql.rows<{ domain: string; service_id: string }>(`SELECT DISTINCT domain, service_id FROM routes WHERE domain = ANY($1::text[])`, [domains]);
  const serving = await servingNodes(sql, [...new Set(routes.map((r) => r.service_id))]);
  const nodeIds = [...new Set(serving.map((s) => s.node_id))];
  const nodes = new Map(
    (
      await sql.rows<NodeRow>(
        `SELECT id, name, ('${CAPABILITIES.CERTIFICATES_SHARE}' = ANY(capabilities)) AS shares, (unreachable_since IS NULL AND NOT decommissioned) AS live,
          private_address, challenge_port FROM nodes WHERE id = ANY($1::text[])`,
        [nodeIds],
      )
    ).map((n) => [n.id, n]),
  );
  const recorded = new Map(
    (
      await sql.rows<{ domain: string; issuer: string }>(
        `SELECT d.domain, n.name AS issuer FROM domain_certificates d JOIN nodes n ON n.id = d.issuer_node_id WHERE d.domain = ANY($1::text[])`,
        [domains],
      )
    ).map((r) => [r.domain, r.issuer]),
  );
  const byService = new Map<string, string[]>();
  for (const s of serving) byService.set(s.service_id, [...(byService.get(s.service_id) ?? []), s.node_id]);
  const changed: { domain: string; nodeId: string }[] = [];
  for (const domain of new Set(routes.map((r) => r.domain))) {
    const ids = new Set(routes.filter((r) => r.domain === domain).flatMap((r) => byService.get(r.service_id) ?? []));
    const candidates = [...ids]
      .map((id) => nodes.get(id))
      .filter((n): n is NodeRow => n !== undefined)
      .map((n) => ({ name: n.name, shares: n.shares, live: n.live, privateAddress: n.private_address, challengePort: n.challenge_port }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const current = recorded.get(domain) ?? null;
    const issuer = chooseIssuer(candidates, current);
    out.set(domain, { issuer, serving: candidates });
    // None eligible: the row (and a certificate in it) stays for when one is again.
    if (issuer !== null && issuer !== current) changed.push({ domain, nodeId: [...nodes.values()].find((n) => n.name === issuer)!.id });
  }
  if (changed.length > 0) {
    await sql.run(
      `INSERT INTO domain_certificates (domain, issuer_node_id)
      SELECT * FROM unnest($1::text[], $2::text[])
      ON CONFLICT (domain) DO UPDATE SET issuer_node_id = EXCLUDED.issuer_node_id, updated_at = now()`,
      [changed.map((c) => c.domain), changed.map((c) => c.nodeId)],
    );
  }
  return out;
}
