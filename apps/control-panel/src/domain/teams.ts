import type { Db } from '../db/database.js';
import { recordChange, type AuditContext } from '../audit/audit-entry.js';
import { AppError } from '../errors.js';
import type { Team } from '../generated/prisma/client.js';
import type { AuthContext } from './access.js';
import { mapPrismaError } from '../db/prisma-helpers.js';

export const presentTeam = (t: Team) => ({ id: t.id, name: t.name, createdAt: t.createdAt.toISOString() });

export async function createTeam(prisma: Db, name: string, audit?: AuditContext) {
  try {
    return presentTeam(
      await prisma.$transaction(async (tx) => {
        const team = await tx.team.create({ data: { name } });
        await recordChange(tx, audit, { action: 'team.create', targetType: 'team', targetId: team.id, teamId: team.id });
        return team;
      }),
    );
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
