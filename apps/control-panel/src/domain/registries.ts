import { randomBytes } from 'node:crypto';
import { normalizeRegistryHost } from '@tether/protocol';
import { AppError } from '../errors.js';
import { recordChange, type AuditContext } from '../audit/audit-entry.js';
import type { Db, Tx } from '../db/database.js';
import { mapPrismaError } from '../db/prisma-helpers.js';
import type { Registry } from '../generated/prisma/client.js';
import { sealRegistryPassword } from '../secrets/registry-credentials.js';
import type { Keyring } from '../secrets/keyring.js';
import { teamScope, type AuthContext } from './access.js';

// A team's private registries (issue 24): one per (team, normalised host),
// the password write-only and sealed under the secrets keyring. Answers show
// host and username, never the password. A deployment of an image from a host
// the team has a registry for records that registry (its id) and is carried
// out with its credentials as they are when the frame leaves
// (secrets/secret-delivery.ts).

export interface RegistryInput {
  /** Operators name the team; a customer's token is its own team. */
  teamId?: string;
  host: string;
  username: string;
  password: string;
}

export const presentRegistry = (r: Registry) => ({
  id: r.id,
  teamId: r.teamId,
  host: r.host,
  username: r.username,
  createdAt: r.createdAt.toISOString(),
  updatedAt: r.updatedAt.toISOString(),
});

const notFound = () => new AppError('NOT_FOUND', 'no such registry');
const hostTaken = (host: string) => new AppError('CONFLICT', `the team already has credentials for registry ${host}; replace them with PUT /v1/registries/:id`, { host });

/** Host as stored: lower-case, port kept, Docker Hub's aliases as docker.io; anything else is refused. */
export function registryHost(host: string): string {
  const normal = normalizeRegistryHost(host);
  if (!/^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*(?::[0-9]{1,5})?$/.test(normal) || normal.length > 253) {
    throw new AppError('INVALID_REGISTRY_HOST', `${JSON.stringify(host.slice(0, 80))} is not a registry host (a DNS name or IPv4 address, an optional :port)`);
  }
  return normal;
}

function needKeyring(keyring: Keyring | null): Keyring {
  if (!keyring) throw new AppError('SECRETS_NOT_CONFIGURED', 'the panel has no secrets key (TETHER_SECRETS_KEY or TETHER_SECRETS_KEY_FILE), so it stores no registry password');
  return keyring;
}

async function owningTeam(tx: Tx, auth: AuthContext, teamId: string | undefined): Promise<string> {
  if (auth.role === 'customer') {
    if (teamId !== undefined && teamId !== auth.teamId) throw new AppError('NOT_FOUND', 'no such team');
    return teamScope(auth).teamId!;
  }
  if (teamId === undefined) throw new AppError('VALIDATION_FAILED', 'operators must name the teamId the registry belongs to');
  if (!(await tx.team.findUnique({ where: { id: teamId }, select: { id: true } }))) throw new AppError('NOT_FOUND', 'no such team');
  return teamId;
}

const sealedColumns = (keyring: Keyring, row: { id: string; teamId: string; host: string }, password: string) => {
  const sealed = sealRegistryPassword(keyring, row, password);
  return { keyId: sealed.keyId, nonce: Buffer.from(sealed.nonce), ciphertext: Buffer.from(sealed.ciphertext) };
};

export async function createRegistry(prisma: Db, keyring: Keyring | null, auth: AuthContext, input: RegistryInput, audit?: AuditContext) {
  const ring = needKeyring(keyring);
  const host = registryHost(input.host);
  return prisma.$transaction(async (tx) => {
    const teamId = await owningTeam(tx, auth, input.teamId);
    const id = `reg_${randomBytes(15).toString('base64url')}`;
    try {
      const row = await tx.registry.create({ data: { id, teamId, host, username: input.username, ...sealedColumns(ring, { id, teamId, host }, input.password) } });
      await recordChange(tx, audit, { action: 'registry.create', targetType: 'registry', targetId: id, teamId });
      return presentRegistry(row);
    } catch (err) {
      mapPrismaError(err, { P2002: hostTaken(host) });
    }
  });
}

/** PUT: host, username and password replaced at once (the password is sealed anew, bound to the new host). */
export async function replaceRegistry(prisma: Db, keyring: Keyring | null, auth: AuthContext, id: string, input: Omit<RegistryInput, 'teamId'>, audit?: AuditContext) {
  const ring = needKeyring(keyring);
  const host = registryHost(input.host);
  return prisma.$transaction(async (tx) => {
    const current = await tx.registry.findFirst({ where: { id, ...teamScope(auth) }, select: { teamId: true } });
    if (!current) throw notFound();
    try {
      const row = await tx.registry.update({
        where: { id },
        data: { host, username: input.username, updatedAt: new Date(), ...sealedColumns(ring, { id, teamId: current.teamId, host }, input.password) },
      });
      await recordChange(tx, audit, { action: 'registry.replace', targetType: 'registry', targetId: id, teamId: current.teamId });
      return presentRegistry(row);
    } catch (err) {
      mapPrismaError(err, { P2002: hostTaken(host), P2025: notFound() });
    }
  });
}

export async function listRegistries(prisma: Db, auth: AuthContext, filter: { teamId?: string }) {
  const rows = await prisma.registry.findMany({ where: { AND: [teamScope(auth), filter.teamId ? { teamId: filter.teamId } : {}] }, orderBy: [{ teamId: 'asc' }, { host: 'asc' }] });
  return rows.map(presentRegistry);
}

export async function getRegistry(prisma: Db, auth: AuthContext, id: string) {
  const row = await prisma.registry.findFirst({ where: { id, ...teamScope(auth) } });
  if (!row) throw notFound();
  return presentRegistry(row);
}

export async function deleteRegistry(prisma: Db, auth: AuthContext, id: string, audit?: AuditContext): Promise<void> {
  await prisma.$transaction(async (tx) => {
    const current = await tx.registry.findFirst({ where: { id, ...teamScope(auth) }, select: { teamId: true } });
    if (!current) throw notFound();
    await tx.registry.delete({ where: { id } });
    await recordChange(tx, audit, { action: 'registry.delete', targetType: 'registry', targetId: id, teamId: current.teamId });
  });
}

/** The team's registry for an image host, as a deployment records it (id and host only). */
export interface RegistryRef {
  id: string;
  host: string;
}
