import type { FastifyRequest } from 'fastify';
import { TickBatcher } from '@tether/common';
import { AppError } from '../errors.js';
import { sqlOf, type Db } from '../db/database.js';
import { OPEN_READ_LINGER_MS } from '../session-writes/session-store.js';
import { isDatabaseUnavailable } from '../db/db-faults.js';
import { hashToken } from '../domain/tokens.js';

export interface AuthenticatedNode {
  id: string;
  name: string;
}

interface NodeRow extends AuthenticatedNode {
  decommissioned: boolean;
}

/** Verified node tokens kept, at most this many (the oldest verification goes first). */
const MAX_CACHED_NODES = 200_000;

/**
 * Checks the node token on the upgrade request, before any socket exists:
 * unknown token 401, decommissioned node 403 AGENT_DECOMMISSIONED (the code the agent acts on,
 * DECOMMISSIONED_REFUSAL_CODE). Both answers are plain HTTP.
 *
 * A node's token never changes and decommissioning is one-way, so a verified
 * token is remembered (`cacheMs`) and a warm check asks no query: a reconnect
 * storm of known nodes costs the database nothing here. A decommission on this
 * panel forgets the node at once (`forget`); `cacheMs` bounds how long another
 * panel's decommission can go unseen. Cold checks made in the same turn of the
 * loop share one query (`token_hash = ANY(…)`). While the database cannot
 * answer, a remembered token is honoured whatever its age (sessions survive an
 * outage); an unknown one gets DATABASE_UNAVAILABLE.
 */
export class NodeAuthenticator {
  private readonly verified = new Map<string, { node: AuthenticatedNode; at: number }>();
  private readonly cold: TickBatcher<string, NodeRow>;
  /** Database lookups made (what a test of the warm path counts). */
  queries = 0;

  constructor(
    private readonly prisma: Db,
    private readonly cacheMs: number,
  ) {
    this.cold = new TickBatcher(async (hashes) => {
      this.queries++;
      const rows = await sqlOf(this.prisma).rows<NodeRow & { token_hash: string }>(
        'SELECT id, name, decommissioned, token_hash FROM nodes WHERE token_hash = ANY($1::text[])',
        [hashes],
      );
      return new Map(rows.map((r) => [r.token_hash, { id: r.id, name: r.name, decommissioned: r.decommissioned }]));
    }, 1_000, 2, OPEN_READ_LINGER_MS);
  }

  async authenticate(request: FastifyRequest): Promise<AuthenticatedNode> {
    const header = request.headers.authorization;
    const token = header?.startsWith('Bearer ') ? header.slice('Bearer '.length).trim() : '';
    if (!token) throw new AppError('UNAUTHORIZED', 'a node token is required: Authorization: Bearer <node token>');
    const tokenHash = hashToken(token);
    const cached = this.verified.get(tokenHash);
    if (cached && Date.now() - cached.at <= this.cacheMs) return cached.node;
    let node: NodeRow | undefined;
    try {
      node = await this.cold.load(tokenHash);
    } catch (err) {
      if (cached && isDatabaseUnavailable(err)) return cached.node;
      throw err;
    }
    this.verified.delete(tokenHash);
    if (!node) throw new AppError('UNAUTHORIZED', 'unknown node token');
    if (node.decommissioned) throw new AppError('AGENT_DECOMMISSIONED', `node ${node.name} is decommissioned; its agent is refused and stops every container it runs for Tether`);
    const verified = { id: node.id, name: node.name };
    if (this.cacheMs > 0) {
      this.verified.set(tokenHash, { node: verified, at: Date.now() });
      if (this.verified.size > MAX_CACHED_NODES) this.verified.delete(this.verified.keys().next().value!);
    }
    return verified;
  }

  /** A node was decommissioned: its token is checked against the database again (and refused). */
  forget(nodeId: string): void {
    for (const [hash, entry] of this.verified) if (entry.node.id === nodeId) this.verified.delete(hash);
  }
}
