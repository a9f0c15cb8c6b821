import { createHash, randomBytes } from 'node:crypto';

// Bearer tokens (operator, customer) and agent tokens (node) share one shape:
// a prefix that says what the token is (so a leaked one is recognisable in
// logs and secret scanners) and 32 random bytes. Only the sha256 of a token is
// stored; the token itself is shown once, when it is made.

export type TokenKind = 'operator' | 'customer' | 'node';

const PREFIX: Record<TokenKind, string> = {
  operator: 'tth_op_',
  customer: 'tth_cu_',
  node: 'tth_node_',
};

export function generateToken(kind: TokenKind): string {
  return PREFIX[kind] + randomBytes(32).toString('base64url');
}

/**
 * sha256 hex of a token. A plain (unsalted) hash is enough because tokens are
 * 256 random bits: nothing to brute-force, and lookups stay one indexed query.
 */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}
