import { PanelError } from '../errors.js';
import { sqlOf, type Db, type Tx } from '../db/database.js';
import { prismaSql } from '../db/sql.js';
import type { Keyring } from './keyring.js';

// Service secrets in the database: one row per version, sealed under the
// keyring's active key and bound (GCM's additional data) to the service, name
// and version it was written for. Plain values exist only in memory, on their
// way in from a request and on their way out in a deploy frame.

/** What answers show of a secret: never its value. */
export interface SecretInfo {
  name: string;
  version: number;
  setAt: string;
}

/** A version a deployment records and is carried out with. */
/** A secret version a deployment recorded (declared with the row's shape in db/deployment-spec.ts). */
export type { SecretRef } from '../db/deployment-spec.js';
import type { SecretRef } from '../db/deployment-spec.js';

export const secretAad = (serviceId: string, name: string, version: number) => `tether-secret\0${serviceId}\0${name}\0${version}`;

/**
 * Sets (a string) or removes (null) secrets of a service, by name; the others
 * stay. The caller holds the service's row lock, so versions only grow.
 */
export async function writeSecrets(tx: Tx, keyring: Keyring, serviceId: string, patch: Record<string, string | null>): Promise<void> {
  for (const [name, value] of Object.entries(patch)) {
    const sql = prismaSql(tx);
    await sql.run(`UPDATE service_secrets SET removed_at = now() WHERE service_id = $1 AND name = $2 AND removed_at IS NULL`, [serviceId, name]);
    if (value === null) continue;
    const [{ next }] = (await sql.rows<{ next: number }>(
      `SELECT COALESCE(MAX(version), 0) + 1 AS next FROM service_secrets WHERE service_id = $1 AND name = $2`,
      [serviceId, name],
    )) as [{ next: number }];
    const sealed = keyring.seal(value, secretAad(serviceId, name, next));
    await tx.serviceSecret.create({
      data: { serviceId, name, version: next, keyId: sealed.keyId, nonce: Buffer.from(sealed.nonce), ciphertext: Buffer.from(sealed.ciphertext) },
    });
  }
}

export interface SecretRequest extends SecretRef {
  serviceId: string;
}

/** The plain values of the versions asked for, by service id, then name. A version not stored is an error. */
export async function openSecrets(db: Db, keyring: Keyring | null, wanted: readonly SecretRequest[]): Promise<Map<string, Record<string, string>>> {
  const out = new Map<string, Record<string, string>>();
  if (wanted.length === 0) return out;
  if (!keyring) throw new PanelError('SECRETS_KEY_MISSING', 'this panel has no secrets key, so it cannot send secrets');
  const rows = await sqlOf(db).rows<{ service_id: string; name: string; version: number; key_id: string; nonce: Uint8Array; ciphertext: Uint8Array }>(
    `SELECT s.service_id, s.name, s.version, s.key_id, s.nonce, s.ciphertext
    FROM service_secrets s JOIN unnest($1::text[], $2::text[], $3::int[]) AS w(service_id, name, version)
      ON s.service_id = w.service_id AND s.name = w.name AND s.version = w.version`,
    [wanted.map((w) => w.serviceId), wanted.map((w) => w.name), wanted.map((w) => w.version)],
  );
  for (const r of rows) {
    const value = keyring.open({ keyId: r.key_id, nonce: r.nonce, ciphertext: r.ciphertext }, secretAad(r.service_id, r.name, r.version));
    let values = out.get(r.service_id);
    if (!values) out.set(r.service_id, (values = {}));
    values[r.name] = value;
  }
  for (const w of wanted) {
    if (out.get(w.serviceId)?.[w.name] === undefined) throw new PanelError('SECRET_UNREADABLE', `secret ${w.name} version ${w.version} of service ${w.serviceId} is not stored`);
  }
  return out;
}
