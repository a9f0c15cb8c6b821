import { AppError } from '../errors.js';
import type { AuthContext } from '../domain/access.js';

// Everything a token holds open past its request's answer: log follows,
// deployment event streams, `?wait=` waits. Held here by token so that a
// revocation (on this panel, or signalled by another over NOTIFY) ends each
// of them at once instead of when it ends by itself, and so that one token or
// one team cannot hold the panel's streams: waits and event streams are capped
// per token and per team (429 STREAMS_EXHAUSTED). Log follows are capped per
// node by the relay and are held here for revocation only.

export type HeldKind = 'wait' | 'events' | 'logs';

export type EndReason = 'revoked';

export interface Held {
  readonly tokenId: string;
  readonly teamId: string | null;
  readonly kind: HeldKind;
  /** Ends the stream or wait (idempotent on the caller's side); it then releases itself. */
  readonly end: (reason: EndReason) => void;
}

export interface HeldLimits {
  /** Waits and event streams one token may hold at once. */
  perToken: number;
  /** Waits and event streams one team's tokens may hold at once. */
  perTeam: number;
}

const capped = (kind: HeldKind) => kind !== 'logs';

export class HeldStreams {
  private readonly byToken = new Map<string, Set<Held>>();
  private readonly cappedByToken = new Map<string, number>();
  private readonly cappedByTeam = new Map<string, number>();

  constructor(private readonly limits: HeldLimits) {}

  /** Registers what `auth` now holds; throws STREAMS_EXHAUSTED past a cap. Call `release` when it ends. */
  hold(auth: Pick<AuthContext, 'tokenId' | 'teamId'>, kind: HeldKind, end: (reason: EndReason) => void): Held {
    if (capped(kind)) {
      const byToken = this.cappedByToken.get(auth.tokenId) ?? 0;
      if (byToken >= this.limits.perToken) {
        throw new AppError('STREAMS_EXHAUSTED', `this token already holds ${byToken} waits and event streams (TETHER_STREAMS_PER_TOKEN)`);
      }
      const byTeam = auth.teamId ? (this.cappedByTeam.get(auth.teamId) ?? 0) : 0;
      if (auth.teamId && byTeam >= this.limits.perTeam) {
        throw new AppError('STREAMS_EXHAUSTED', `this team's tokens already hold ${byTeam} waits and event streams (TETHER_STREAMS_PER_TEAM)`);
      }
      this.cappedByToken.set(auth.tokenId, byToken + 1);
      if (auth.teamId) this.cappedByTeam.set(auth.teamId, byTeam + 1);
    }
    const held: Held = { tokenId: auth.tokenId, teamId: auth.teamId, kind, end };
    let set = this.byToken.get(auth.tokenId);
    if (!set) this.byToken.set(auth.tokenId, (set = new Set()));
    set.add(held);
    return held;
  }

  release(held: Held): void {
    const set = this.byToken.get(held.tokenId);
    if (!set?.delete(held)) return;
    if (set.size === 0) this.byToken.delete(held.tokenId);
    if (!capped(held.kind)) return;
    decrement(this.cappedByToken, held.tokenId);
    if (held.teamId) decrement(this.cappedByTeam, held.teamId);
  }

  /** The token was revoked: everything it holds ends now. Returns how many. */
  revoke(tokenId: string): number {
    const set = this.byToken.get(tokenId);
    if (!set) return 0;
    const all = [...set];
    for (const held of all) {
      this.release(held);
      held.end('revoked');
    }
    return all.length;
  }

  /** Tokens holding something now (a rescan asks the database which of them were revoked meanwhile). */
  tokenIds(): string[] {
    return [...this.byToken.keys()];
  }

  count(kind?: HeldKind): number {
    let n = 0;
    for (const set of this.byToken.values()) for (const h of set) if (!kind || h.kind === kind) n++;
    return n;
  }
}

function decrement(map: Map<string, number>, key: string): void {
  const n = (map.get(key) ?? 1) - 1;
  if (n > 0) map.set(key, n);
  else map.delete(key);
}
