import { sqlOf, type Db } from '../db/database.js';
import { prismaSql } from '../db/sql.js';
import { PanelError } from '../errors.js';
import type { Keyring, SealedValue } from './keyring.js';

// A team's registry passwords in the database (issue 24): sealed under the
// secrets keyring like service secrets, bound (GCM's additional data) to the
// registry row, its team and host, so a row copied to another team or host
// does not open. The plain password exists only in memory: on its way in from
// a request and on its way out in a deploy or workloads frame.

export const registryAad = (id: string, teamId: string, host: string) => `tether-registry\0${id}\0${teamId}\0${host}`;

export function sealRegistryPassword(keyring: Keyring, row: { id: string; teamId: string; host: string }, password: string): SealedValue {
  return keyring.seal(password, registryAad(row.id, row.teamId, row.host));
}

/** What a frame carries for one registry. */
export interface RegistryCredentials {
  host: string;
  username: string;
  password: string;
}

/** The credentials of the registries asked for, by id; a registry deleted since is absent. */
export async function openRegistryCredentials(db: Db, keyring: Keyring | null, ids: readonly string[]): Promise<Map<string, RegistryCredentials>> {
  const out = new Map<string, RegistryCredentials>();
  if (ids.length === 0) return out;
  const rows = await sqlOf(db).rows<{ id: string; team_id: string; host: string; username: string; key_id: string; nonce: Uint8Array; ciphertext: Uint8Array }>(
    `SELECT id, team_id, host, username, key_id, nonce, ciphertext FROM registries WHERE id = ANY($1::text[])`,
    [[...new Set(ids)]],
  );
  if (rows.length > 0 && !keyring) throw new PanelError('SECRETS_KEY_MISSING', 'this panel has no secrets key, so it cannot send registry credentials');
  for (const r of rows) {
    const password = keyring!.open({ keyId: r.key_id, nonce: r.nonce, ciphertext: r.ciphertext }, registryAad(r.id, r.team_id, r.host));
    out.set(r.id, { host: r.host, username: r.username, password });
  }
  return out;
}

/** Key ids of registry rows (the start check and the rotation count them with service secrets). */
export async function registryKeyIds(db: Db): Promise<string[]> {
  const rows = await sqlOf(db).rows<{ key_id: string }>(`SELECT DISTINCT key_id FROM registries ORDER BY key_id`);
  return rows.map((r) => r.key_id);
}

/** Re-encrypts every registry row not under the active key, in locked batches; returns how many moved. */
export async function reencryptRegistries(db: Db, keyring: Keyring, batch = 200): Promise<number> {
  let moved = 0;
  for (;;) {
    const n = await db.$transaction(async (tx) => {
      const rows = await prismaSql(tx).rows<{ id: string; team_id: string; host: string; key_id: string; nonce: Uint8Array; ciphertext: Uint8Array }>(
        `SELECT id, team_id, host, key_id, nonce, ciphertext FROM registries WHERE key_id <> $1 ORDER BY id LIMIT $2 FOR UPDATE`,
        [keyring.activeKeyId, batch],
      );
      for (const r of rows) {
        const aad = registryAad(r.id, r.team_id, r.host);
        const sealed = keyring.seal(keyring.open({ keyId: r.key_id, nonce: r.nonce, ciphertext: r.ciphertext }, aad), aad);
        await tx.registry.update({ where: { id: r.id }, data: { keyId: sealed.keyId, nonce: Buffer.from(sealed.nonce), ciphertext: Buffer.from(sealed.ciphertext) } });
      }
      return rows.length;
    });
    moved += n;
    if (n < batch) return moved;
  }
}
