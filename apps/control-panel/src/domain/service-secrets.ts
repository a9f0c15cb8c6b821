import { AppError } from '../errors.js';
import type { Tx } from '../db/database.js';
import type { Keyring } from '../secrets/keyring.js';
import { writeSecrets, type SecretInfo } from '../secrets/secret-store.js';

// A service's secrets as the API sees them: set by name beside env, shown by
// name and version only.

/** PATCH: a value sets (a new version), null removes; names not given stay. */
export type SecretsPatch = Record<string, string | null>;

/** Prisma include: the current versions, for answers. */
export const secretsOfService = {
  secrets: { where: { removedAt: null }, select: { name: true, version: true, setAt: true }, orderBy: { name: 'asc' } },
} as const;

export const presentSecrets = (rows: { name: string; version: number; setAt: Date }[]): SecretInfo[] =>
  rows.map((r) => ({ name: r.name, version: r.version, setAt: r.setAt.toISOString() }));

/**
 * Refuses a name that would be an environment variable and a secret at once,
 * and values to store when the panel has no key. Names only in messages.
 */
export function checkSecretNames(env: Record<string, string>, secretNames: readonly string[], keyring: Keyring | null, patch: SecretsPatch): void {
  const both = secretNames.filter((n) => Object.hasOwn(env, n)).sort();
  if (both.length > 0) throw new AppError('SECRET_NAME_IN_ENV', `${both.join(', ')} ${both.length === 1 ? 'is' : 'are'} both in env and in secrets; keep each name in one`, { names: both });
  if (!keyring && Object.values(patch).some((v) => v !== null)) throw new AppError('SECRETS_NOT_CONFIGURED');
}

export async function writeServiceSecrets(tx: Tx, keyring: Keyring | null, serviceId: string, patch: SecretsPatch): Promise<void> {
  if (Object.keys(patch).length === 0) return;
  if (!keyring) {
    // Only removals get here without a key (checkSecretNames refused values): nothing to seal.
    for (const name of Object.keys(patch)) await tx.serviceSecret.updateMany({ where: { serviceId, name, removedAt: null }, data: { removedAt: new Date() } });
    return;
  }
  await writeSecrets(tx, keyring, serviceId, patch);
}
