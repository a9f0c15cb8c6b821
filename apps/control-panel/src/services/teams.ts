import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import type { ApiToken, Team } from '../generated/prisma/client.js';
import type { AuthContext } from '../lib/auth.js';
import { toIso } from '../lib/schemas.js';
import { generateToken, hashToken } from '../lib/tokens.js';
import { mapPrismaError } from './db-helpers.js';

export const presentTeam = (t: Team) => ({ id: t.id, name: t.name, createdAt: t.createdAt.toISOString() });

export const presentToken = (t: ApiToken) => ({
  id: t.id,
  name: t.name,
  role: t.role,
  teamId: t.teamId,
  createdAt: t.createdAt.toISOString(),
  lastUsedAt: toIso(t.lastUsedAt),
  revokedAt: toIso(t.revokedAt),
});

export async function createTeam(prisma: Db, name: string) {
  try {
    return presentTeam(await prisma.team.create({ data: { name } }));
  } catch (err) {
    mapPrismaError(err, { P2002: new AppError('CONFLICT', `a team named ${name} already exists`) });
  }
}

export async function listTeams(prisma: Db) {
  return (await prisma.team.findMany({ orderBy: { createdAt: 'asc' } })).map(presentTeam);
}

/** Operators see every team; a customer sees only its own (any other id is 404). */
export async function getTeam(prisma: Db, auth: AuthContext, id: string) {
  if (auth.role === 'customer' && auth.teamId !== id) throw new AppError('NOT_FOUND', 'no such team');
  const team = await prisma.team.findUnique({ where: { id } });
  if (!team) throw new AppError('NOT_FOUND', 'no such team');
  return presentTeam(team);
}

async function requireTeam(prisma: Db, id: string): Promise<void> {
  if (!(await prisma.team.findUnique({ where: { id }, select: { id: true } }))) throw new AppError('NOT_FOUND', 'no such team');
}

/** A customer token for a team. The token is in this answer only; the database keeps its hash. */
export async function createCustomerToken(prisma: Db, teamId: string, name: string) {
  await requireTeam(prisma, teamId);
  const token = generateToken('customer');
  try {
    const row = await prisma.apiToken.create({ data: { name, role: 'customer', teamId, tokenHash: hashToken(token) } });
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
export async function revokeToken(prisma: Db, id: string) {
  const token = await prisma.apiToken.findUnique({ where: { id } });
  if (!token) throw new AppError('NOT_FOUND', 'no such token');
  if (token.revokedAt) return presentToken(token);
  return presentToken(await prisma.apiToken.update({ where: { id }, data: { revokedAt: new Date() } }));
}
