import { AppError } from '../errors.js';
import type { Tx } from '../db/database.js';

// A domain belongs to one team (issue 21): its row in `domains` is the one
// thing every attach on it locks, so two teams racing for a domain have
// exactly one winner. A row left by routes that were all removed (a service
// deleted with its routes) is taken over by the next attach. The row's node is
// the node of the service its first route went to; since cross-node routing
// (issue 37) a domain's routes may go to services on several nodes, and every
// node serving one of them serves it (routing/serving-nodes.ts).

const taken = (domain: string) => new AppError('DOMAIN_TAKEN', `${domain} is attached to another team's service`);

/** Claims (or confirms) `domain` for the team and node, holding its row locked until the transaction ends. */
export async function claimDomain(tx: Tx, domain: string, owner: { teamId: string; nodeId: string }): Promise<void> {
  await tx.$executeRaw`INSERT INTO domains (name, team_id, node_id) VALUES (${domain}, ${owner.teamId}, ${owner.nodeId}) ON CONFLICT (name) DO NOTHING`;
  const [row] = await tx.$queryRaw<{ team_id: string; node_id: string }[]>`SELECT team_id, node_id FROM domains WHERE name = ${domain} FOR UPDATE`;
  if (!row || row.team_id === owner.teamId) return;
  if ((await tx.route.count({ where: { domain } })) === 0) {
    await tx.$executeRaw`UPDATE domains SET team_id = ${owner.teamId}, node_id = ${owner.nodeId} WHERE name = ${domain}`;
    return;
  }
  throw taken(domain);
}

/** After a detach: a domain with no route left belongs to nobody. Call with the domain's routes already gone. */
export async function releaseDomainIfUnused(tx: Tx, domain: string): Promise<void> {
  await tx.$queryRaw`SELECT 1 FROM domains WHERE name = ${domain} FOR UPDATE`;
  if ((await tx.route.count({ where: { domain } })) === 0) await tx.$executeRaw`DELETE FROM domains WHERE name = ${domain}`;
}

/** A service about to move to `nodeId`: the domains only its routes use move with it. */
export async function moveDomainsOf(tx: Tx, serviceId: string, nodeId: string): Promise<void> {
  const domains = [...new Set((await tx.route.findMany({ where: { serviceId }, select: { domain: true } })).map((r) => r.domain))].sort();
  for (const domain of domains) {
    await tx.$queryRaw`SELECT 1 FROM domains WHERE name = ${domain} FOR UPDATE`;
    if ((await tx.route.count({ where: { domain, serviceId: { not: serviceId } } })) > 0) continue;
    await tx.$executeRaw`UPDATE domains SET node_id = ${nodeId} WHERE name = ${domain}`;
  }
}
