import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import type { Team } from '../generated/prisma/client.js';
import type { AuthContext } from './access.js';
import { mapPrismaError } from '../db/prisma-helpers.js';

export const presentTeam = (t: Team) => ({ id: t.id, name: t.name, createdAt: t.createdAt.toISOString() });

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

/** NOT_FOUND unless the team exists. */
export async function requireTeam(prisma: Db, id: string): Promise<void> {
  if (!(await prisma.team.findUnique({ where: { id }, select: { id: true } }))) throw new AppError('NOT_FOUND', 'no such team');
}
