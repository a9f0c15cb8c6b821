import type { Db } from '../db/database.js';
import { PanelError } from '../errors.js';
import { generateToken, hashToken } from './tokens.js';

// The first operator token. With TETHER_ADMIN_TOKEN set, that token is made
// valid (only its hash is stored; changing the variable replaces the previous
// one). Without it, a token is generated when no usable operator token exists
// (first start, or every operator token revoked) and handed back to be printed
// once; later starts generate nothing.

export const ENV_ADMIN_TOKEN_NAME = 'admin (TETHER_ADMIN_TOKEN)';
export const GENERATED_ADMIN_TOKEN_NAME = 'admin (generated at first start)';

/** Advisory lock so two panels starting at once cannot both generate a token. */
const BOOTSTRAP_LOCK_KEY = 72707370;

export type AdminTokenResult =
  | { kind: 'configured' }
  | { kind: 'generated'; token: string }
  | { kind: 'existing' };

export async function ensureAdminToken(prisma: Db, configured: string | undefined): Promise<AdminTokenResult> {
  return prisma.$transaction(async (tx) => {
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK_KEY})`;
    if (configured) {
      const tokenHash = hashToken(configured);
      const same = await tx.apiToken.findUnique({ where: { tokenHash } });
      if (same && same.role !== 'operator') throw new PanelError('ADMIN_TOKEN_CONFLICT', 'TETHER_ADMIN_TOKEN is already in use as a customer token; choose another');
      if (same) {
        if (same.revokedAt) await tx.apiToken.update({ where: { id: same.id }, data: { revokedAt: null } });
        return { kind: 'configured' };
      }
      const previous = await tx.apiToken.findFirst({ where: { name: ENV_ADMIN_TOKEN_NAME, role: 'operator', teamId: null } });
      if (previous) await tx.apiToken.update({ where: { id: previous.id }, data: { tokenHash, revokedAt: null } });
      else await tx.apiToken.create({ data: { name: ENV_ADMIN_TOKEN_NAME, role: 'operator', tokenHash } });
      return { kind: 'configured' };
    }
    const usable = await tx.apiToken.count({ where: { role: 'operator', revokedAt: null } });
    if (usable > 0) return { kind: 'existing' };
    const token = generateToken('operator');
    await tx.apiToken.create({ data: { name: GENERATED_ADMIN_TOKEN_NAME, role: 'operator', tokenHash: hashToken(token) } });
    return { kind: 'generated', token };
  });
}
