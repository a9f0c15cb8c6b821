import type { FastifyBaseLogger } from 'fastify';
import type { Loop } from '@tether/common';
import type { Db } from '../db/database.js';
import { refreshedRead } from '../db/last-good-read.js';
import type { Claim } from './sign-in-cookies.js';

// Fleet-page cookies signed out before they expire. A cookie is a signed claim
// any panel checks without the database, so signing out has to be remembered:
// in memory here at once, in `dashboard_sign_outs` for every panel (read again
// at each fleet refresh, and on a LISTEN reconnect), and over NOTIFY so the
// other panels hear it within a second. While the database is down a sign-out
// holds on the panel that took it (and on those that hear the signal); the row
// is written when the sign-out is next tried, or never: documented.

export class SignedOutCookies {
  /** Cookie id → its expiry (ms): nothing is kept past the cookie's own end. */
  private ids = new Map<string, number>();
  private readonly loop: Loop;

  constructor(
    private readonly prisma: Db,
    logger: FastifyBaseLogger,
    refreshMs: number,
  ) {
    this.loop = refreshedRead({ name: 'signed-out-cookies', what: 'signed-out cookie list', refreshMs, logger, read: () => this.refresh() });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  async refresh(): Promise<void> {
    const rows = await this.prisma.dashboardSignOut.findMany({ where: { expiresAt: { gt: new Date() } } });
    // Merged, not replaced: one heard over NOTIFY may not be readable yet (its writer was slower than its signal).
    for (const r of rows) this.ids.set(r.cookieId, r.expiresAt.getTime());
    this.prune();
  }

  /** Remembers a sign-out (this panel's, or one another panel signalled). */
  note(id: string, expiresAtMs: number): void {
    if (expiresAtMs > Date.now()) this.ids.set(id, expiresAtMs);
  }

  /** Records this panel's sign-out for every panel; throws when the database cannot take it. */
  async record(claim: Claim): Promise<void> {
    const expiresAt = new Date(claim.expiresAt * 1000);
    this.note(claim.id, expiresAt.getTime());
    await this.prisma.$transaction([
      this.prisma.dashboardSignOut.deleteMany({ where: { expiresAt: { lt: new Date() } } }),
      this.prisma.dashboardSignOut.upsert({ where: { cookieId: claim.id }, create: { cookieId: claim.id, expiresAt }, update: {} }),
    ]);
  }

  has(id: string): boolean {
    return this.ids.has(id);
  }

  private prune(): void {
    const now = Date.now();
    for (const [id, at] of this.ids) if (at <= now) this.ids.delete(id);
  }
}
