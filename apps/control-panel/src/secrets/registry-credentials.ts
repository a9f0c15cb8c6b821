import { sqlOf, type Db } from '../db/database.js';
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
