import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

// The fleet page's sign-in cookie: a claim "cookie <id> of operator token
// <id> until <exp>" with an HMAC-SHA256 over it. It never holds the token. Any
// panel with the same key can check it without the database; it is valid only
// while the token is in the cached list of valid operator tokens (see
// operator-tokens.ts) and its own id has not been signed out
// (signed-out-cookies.ts). v2 added the cookie's id: a v1 cookie (no id, so no
// way to sign it out alone) is no longer accepted; its holder signs in again.

const VERSION = 'v2';

export interface Claim {
  /** Random per sign-in: what signing out records. */
  id: string;
  tokenId: string;
  /** Seconds since epoch. */
  expiresAt: number;
}

export interface CookieOptions {
  /** The shared secret (TETHER_DASHBOARD_SECRET); a random per-process key when absent. */
  secret: string | undefined;
  ttlMs: number;
  /** The public URL is https: the cookie is `Secure` and named with the `__Host-` prefix. */
  secure: boolean;
}

export class SignInCookies {
  private readonly key: Buffer;
  readonly name: string;

  constructor(private readonly options: CookieOptions) {
    const secret = options.secret ?? randomBytes(32).toString('base64url');
    // A key of its own, so the operator's secret is never used directly as a MAC key of another purpose.
    this.key = createHmac('sha256', secret).update('tether dashboard cookie v1').digest();
    this.name = options.secure ? '__Host-tether_dashboard' : 'tether_dashboard';
  }

  private mac(payload: string): string {
    return createHmac('sha256', this.key).update(payload).digest('base64url');
  }

  sign(tokenId: string, now = Date.now()): { value: string; claim: Claim } {
    const claim = { id: randomBytes(12).toString('base64url'), tokenId, expiresAt: Math.floor((now + this.options.ttlMs) / 1000) };
    const payload = `${VERSION}.${claim.id}.${tokenId}.${claim.expiresAt}`;
    return { value: `${payload}.${this.mac(payload)}`, claim };
  }

  /** The claim of a cookie value whose MAC is right and which has not expired; null otherwise. */
  verify(value: string | undefined, now = Date.now()): Claim | null {
    if (!value || value.length > 300) return null;
    const parts = value.split('.');
    if (parts.length !== 5 || parts[0] !== VERSION) return null;
    const [, id, tokenId, exp, mac] = parts as [string, string, string, string, string];
    if (!/^[A-Za-z0-9_-]{16}$/.test(id) || !/^[A-Za-z0-9_-]{1,64}$/.test(tokenId) || !/^\d{1,12}$/.test(exp)) return null;
    const expected = Buffer.from(this.mac(`${VERSION}.${id}.${tokenId}.${exp}`));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    const expiresAt = Number(exp);
    if (expiresAt * 1000 <= now) return null;
    return { id, tokenId, expiresAt };
  }

  /** The Set-Cookie header that signs in. */
  setCookie(value: string): string {
    const maxAge = Math.floor(this.options.ttlMs / 1000);
    return `${this.name}=${value}; Path=/; Max-Age=${maxAge}; HttpOnly; SameSite=Strict${this.options.secure ? '; Secure' : ''}`;
  }

  /** The Set-Cookie header that signs out. */
  clearCookie(): string {
    return `${this.name}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict${this.options.secure ? '; Secure' : ''}`;
  }

  /** This cookie's value in a Cookie header (the first one of that name). */
  read(header: string | undefined): string | undefined {
    if (!header) return undefined;
    for (const part of header.split(';')) {
      const eq = part.indexOf('=');
      if (eq < 0) continue;
      if (part.slice(0, eq).trim() === this.name) return part.slice(eq + 1).trim();
    }
    return undefined;
  }
}
