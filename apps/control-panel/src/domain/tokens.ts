import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../db/database.js';
import { recordChange, type AuditContext } from '../audit/audit-entry.js';
import { mapPrismaError, toIso } from '../db/prisma-helpers.js';
import { AppError } from '../errors.js';
import type { ApiToken } from '../generated/prisma/client.js';
import { requireTeam } from './teams.js';

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

export const presentToken = (t: ApiToken) => ({
  id: t.id,
  name: t.name,
  role: t.role,
  teamId: t.teamId,
  createdAt: t.createdAt.toISOString(),
  lastUsedAt: toIso(t.lastUsedAt),
  revokedAt: toIso(t.revokedAt),
  expiresAt: toIso(t.expiresAt),
});

/** A customer token for a team. The token is in this answer only; the database keeps its hash. */
export async function createCustomerToken(prisma: Db, teamId: string, name: string, audit?: AuditContext, expiresAt?: string) {
  const expires = expiresAt === undefined ? null : new Date(expiresAt);
  if (expires && !(expires.getTime() > Date.now())) throw new AppError('VALIDATION_FAILED', 'expiresAt must be in the future');
  await requireTeam(prisma, teamId);
  const token = generateToken('customer');
  try {
    const row = await prisma.$transaction(async (tx) => {
      const created = await tx.apiToken.create({ data: { name, role: 'customer', teamId, tokenHash: hashToken(token), expiresAt: expires } });
      await recordChange(tx, audit, { action: 'token.create', targetType: 'token', targetId: created.id, teamId });
      return created;
    });
    return { ...presentToken(row), token };
  } catch (err) {
    // The team was deleted between the check and the insert.
    mapPrismaError(err, { P2003: new AppError('NOT_FOUND', 'no such team') });
  }
}

export async function listTeamTokens(prisma: Db, teamId: string) {
  await requireTeam(prisma, teamId);
  return (await prisma.apiToken.findMany({ where: { teamId }, orderBy: { createdAt: 'asc' } })).map(presentToken);
}

/** Revokes a token (operator or customer). Idempotent: revoking twice keeps the first time. */
export async function revokeToken(prisma: Db, id: string, audit?: AuditContext) {
  const token = await prisma.apiToken.findUnique({ where: { id } });
  if (!token) throw new AppError('NOT_FOUND', 'no such token');
  if (token.revokedAt) return presentToken(token);
  return presentToken(
    await prisma.$transaction(async (tx) => {
      const revoked = await tx.apiToken.update({ where: { id }, data: { revokedAt: new Date() } });
      await recordChange(tx, audit, { action: 'token.revoke', targetType: 'token', targetId: id, teamId: token.teamId });
      return revoked;
    }),
  );
}
