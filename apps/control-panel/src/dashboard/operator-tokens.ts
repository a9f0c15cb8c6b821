import type { FastifyBaseLogger } from 'fastify';
import type { Loop } from '@tether/common';
import type { Db } from '../db/database.js';
import { refreshedRead } from '../db/last-good-read.js';

// The valid operator tokens, cached: a cookie session is valid while the
// token it was signed in with is in this list, so revoking the token ends its
// cookie sessions within one refresh, and a database outage does not sign
// anybody out (the last good list stays).

export class OperatorTokens {
  private byHash = new Map<string, string>();
  private ids = new Set<string>();
  private loaded = false;
  private readonly loop: Loop;

  constructor(
    private readonly prisma: Db,
    logger: FastifyBaseLogger,
    refreshMs: number,
  ) {
    this.loop = refreshedRead({ name: 'operator-tokens', what: 'operator token list', refreshMs, logger, read: () => this.refresh() });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  async refresh(): Promise<void> {
    const rows = await this.prisma.apiToken.findMany({ where: { role: 'operator', revokedAt: null }, select: { id: true, tokenHash: true } });
    this.byHash = new Map(rows.map((r) => [r.tokenHash, r.id]));
    this.ids = new Set(rows.map((r) => r.id));
    this.loaded = true;
  }

  /** Revoked (signalled before the next refresh would tell): its cookie sessions end at once. */
  forget(tokenId: string): void {
    if (!this.ids.delete(tokenId)) return;
    for (const [hash, id] of this.byHash) if (id === tokenId) this.byHash.delete(hash);
  }

  /** Is this token id a valid operator token (as of the last refresh)? */
  valid(tokenId: string): boolean {
    return this.ids.has(tokenId);
  }

  /** The id of the valid operator token with this hash; undefined when unknown (or not yet loaded). */
  idOf(tokenHash: string): string | undefined {
    return this.byHash.get(tokenHash);
  }

  get ready(): boolean {
    return this.loaded;
  }
}
