import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Db } from '../db/database.js';

// Panel-to-panel authentication for the internal surface (/internal/v1). Each
// panel run makes a random secret at start and writes only its SHA-256 with
// its lease row; it presents `Authorization: TetherPanel <panel id>:<secret>`
// to other panels, which check the hash against the caller's row while its
// lease is live. No setting to share: a database reader learns only hashes,
// a network attacker without the secret gets 401, and a secret dies with its
// run (its row's lease ends at stop). Customer, operator and node tokens are
// Bearer tokens and never match (a different scheme, and no token's hash is
// a panel's).

export const PANEL_AUTH_SCHEME = 'TetherPanel';

const HEADER = /^TetherPanel ([A-Za-z0-9._-]{1,64}):([A-Za-z0-9_-]{43})$/;

/** How often a caller this panel does not know yet may make it read the panels' rows again (a flood of bad ids costs at most this). */
const MISS_READ_EVERY_MS = 250;

export function secretHash(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** This panel run's own secret: the header it sends, and the hash its lease row carries. */
export class PanelSecret {
  private readonly secret = randomBytes(32).toString('base64url');
  readonly hash = secretHash(this.secret);

  constructor(private readonly panelId: string) {}

  get authorization(): string {
    return `${PANEL_AUTH_SCHEME} ${this.panelId}:${this.secret}`;
  }
}

/** Checks other panels' credentials against their live lease rows (read at most every MISS_READ_EVERY_MS). */
export class PeerVerifier {
  private hashes = new Map<string, Buffer>();
  private readAt = 0;
  private reading: Promise<void> | undefined;

  constructor(private readonly prisma: Db) {}

  /** The calling panel's id when the header proves it, else null. */
  async verify(header: string | undefined): Promise<string | null> {
    const m = header ? HEADER.exec(header) : null;
    if (!m) return null;
    const [, panelId, secret] = m as unknown as [string, string, string];
    const presented = Buffer.from(secretHash(secret), 'hex');
    if (this.matches(panelId, presented)) return panelId;
    // A panel started since the last read (or one whose secret changed with a restart): read the rows again, rate-limited.
    await this.refresh();
    return this.matches(panelId, presented) ? panelId : null;
  }

  private matches(panelId: string, presented: Buffer): boolean {
    const known = this.hashes.get(panelId);
    return known !== undefined && known.length === presented.length && timingSafeEqual(known, presented);
  }

  /** Live panels' hashes; also called at each lease renewal, so expired panels drop out. */
  async refresh(): Promise<void> {
    if (this.reading) return this.reading;
    if (performance.now() - this.readAt < MISS_READ_EVERY_MS) return;
    this.readAt = performance.now();
    this.reading = (async () => {
      try {
        const rows = await this.prisma.$queryRaw<{ id: string; internal_secret_hash: string }[]>`
          SELECT id, internal_secret_hash FROM panels WHERE lease_until > now() AND internal_secret_hash IS NOT NULL`;
        this.hashes = new Map(rows.map((r) => [r.id, Buffer.from(r.internal_secret_hash, 'hex')]));
      } finally {
        this.reading = undefined;
      }
    })();
    return this.reading;
  }
}
