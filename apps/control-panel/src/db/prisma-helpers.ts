import type { AppError } from '../errors.js';
import { Prisma } from '../generated/prisma/client.js';
import type { Tx } from './database.js';

// Row locks for the few places where two requests could interleave badly:
// placing or deploying onto a node while it is being decommissioned, and
// moving a service while a route is attached to it (the routing.changed event
// must name the node the service really ends up on).

/** Locks a node against decommissioning until the transaction ends; null if it does not exist. */
export async function lockNodeShared(tx: Tx, nodeId: string): Promise<{ decommissioned: boolean; cordoned: boolean } | null> {
  const rows = await tx.$queryRaw<{ decommissioned: boolean; cordoned: boolean }[]>`SELECT decommissioned, cordoned FROM nodes WHERE id = ${nodeId} FOR SHARE`;
  return rows[0] ?? null;
}

/** Locks a service row for the rest of the transaction ('update' to change it, 'share' to attach to it). */
export async function lockService(tx: Tx, serviceId: string, mode: 'update' | 'share'): Promise<boolean> {
  const rows =
    mode === 'update'
      ? await tx.$queryRaw<unknown[]>`SELECT 1 FROM services WHERE id = ${serviceId} FOR UPDATE`
      : await tx.$queryRaw<unknown[]>`SELECT 1 FROM services WHERE id = ${serviceId} FOR SHARE`;
  return rows.length > 0;
}

type KnownCode = 'P2002' | 'P2003' | 'P2025';

/**
 * Turns Prisma's known request errors into catalog errors: P2002 unique
 * violation, P2003 foreign key violation, P2025 record not found. Anything
 * else is rethrown unchanged (and becomes a 500).
 */
export function mapPrismaError(err: unknown, map: Partial<Record<KnownCode, AppError>>): never {
  if (err instanceof Prisma.PrismaClientKnownRequestError) {
    const mapped = map[err.code as KnownCode];
    if (mapped) throw mapped;
  }
  throw err;
}

/** A nullable timestamp column as the API shows it. */
export const toIso = (d: Date | null): string | null => (d ? d.toISOString() : null);
