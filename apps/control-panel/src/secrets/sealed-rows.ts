import { sqlOf, type Db } from '../db/database.js';
import { prismaSql } from '../db/sql.js';
import type { Keyring } from './keyring.js';
import { registryAad } from './registry-credentials.js';
import { secretAad } from './secret-store.js';
import { certificateAad } from './certificate-store.js';

// Every table holding a value sealed under the secrets keyring, in one list:
// the start check (key-check.ts) and `rotate-secrets` (rotate-command.ts) read
// the same tables, so a new sealed column is added here once and is both
// refused when unreadable and moved by a rotation. Table and column names are
// constants of this file, never input.

interface SealedTable {
  /** What the rotation's line calls these rows. */
  label: string;
  table: string;
  /** The row's key (unique; the batch order). */
  id: string;
  keyId: string;
  nonce: string;
  ciphertext: string;
  /** Columns the additional data is made of, read with the row. */
  context: readonly string[];
  aad: (row: Record<string, unknown>) => string;
}

export const SEALED_TABLES: readonly SealedTable[] = [
  {
    label: 'secret',
    table: 'service_secrets',
    id: 'id',
    keyId: 'key_id',
    nonce: 'nonce',
    ciphertext: 'ciphertext',
    context: ['service_id', 'name', 'version'],
    aad: (r) => secretAad(String(r.service_id), String(r.name), Number(r.version)),
  },
  {
    label: 'registry',
    table: 'registries',
    id: 'id',
    keyId: 'key_id',
    nonce: 'nonce',
    ciphertext: 'ciphertext',
    context: ['team_id', 'host'],
    aad: (r) => registryAad(String(r.id), String(r.team_id), String(r.host)),
  },
  {
    // A domain's shared certificate key (certificates.share); key_id is null until its issuer reports one.
    label: 'certificate',
    table: 'domain_certificates',
    id: 'domain',
    keyId: 'key_id',
    nonce: 'key_nonce',
    ciphertext: 'key_ciphertext',
    context: [],
    aad: (r) => certificateAad(String(r.domain)),
  },
];

/** Key ids of stored rows, in every sealed table, that the keyring cannot open (a start refuses them). */
export async function missingKeyIds(db: Db, keyring: Keyring | null): Promise<string[]> {
  const union = SEALED_TABLES.map((t) => `SELECT ${t.keyId} AS key_id FROM ${t.table} WHERE ${t.keyId} IS NOT NULL`).join(' UNION ');
  const rows = await sqlOf(db).rows<{ key_id: string }>(`${union} ORDER BY key_id`);
  return rows.map((r) => r.key_id).filter((id) => !keyring?.has(id));
}

/**
 * Re-encrypts every row of one table not under the keyring's active key, in batches, each in its own transaction
 * with the rows locked (a panel writing at the same time writes under the active key already). Returns how many
 * rows moved.
 */
async function reencryptTable(db: Db, keyring: Keyring, t: SealedTable, batch: number): Promise<number> {
  const columns = [...new Set([t.id, t.keyId, t.nonce, t.ciphertext, ...t.context])].join(', ');
  let moved = 0;
  for (;;) {
    const n = await db.$transaction(async (tx) => {
      const sql = prismaSql(tx);
      const rows = await sql.rows<Record<string, unknown>>(
        `SELECT ${columns} FROM ${t.table} WHERE ${t.keyId} IS NOT NULL AND ${t.keyId} <> $1 ORDER BY ${t.id} LIMIT $2 FOR UPDATE`,
        [keyring.activeKeyId, batch],
      );
      for (const r of rows) {
        const aad = t.aad(r);
        const plain = keyring.open({ keyId: String(r[t.keyId]), nonce: r[t.nonce] as Uint8Array, ciphertext: r[t.ciphertext] as Uint8Array }, aad);
        const sealed = keyring.seal(plain, aad);
        await sql.run(`UPDATE ${t.table} SET ${t.keyId} = $2, ${t.nonce} = $3, ${t.ciphertext} = $4 WHERE ${t.id} = $1`, [
          r[t.id],
          sealed.keyId,
          Buffer.from(sealed.nonce),
          Buffer.from(sealed.ciphertext),
        ]);
      }
      return rows.length;
    });
    moved += n;
    if (n < batch) return moved;
  }
}

/** Re-encrypts every sealed row of every table under the active key; how many moved, by table label. */
export async function reencryptAll(db: Db, keyring: Keyring, batch = 200): Promise<{ label: string; moved: number }[]> {
  const out: { label: string; moved: number }[] = [];
  for (const t of SEALED_TABLES) out.push({ label: t.label, moved: await reencryptTable(db, keyring, t, batch) });
  return out;
}
