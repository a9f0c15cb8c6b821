import type { Db } from '../db/database.js';
import { PanelError } from '../errors.js';
import type { Keyring } from './keyring.js';
import { missingKeyIds } from './sealed-rows.js';

/**
 * A panel that could not open what the database holds would fail every
 * deploy of those services later, one by one: it refuses to start instead
 * (main.ts: one line, exit 2).
 */
export async function refuseUnreadableSecrets(db: Db, keyring: Keyring | null): Promise<void> {
  const missing = await missingKeyIds(db, keyring);
  if (missing.length === 0) return;
  const given = keyring ? `it was given ${keyring.keyIds.join(', ')}` : 'it was given no key';
  throw new PanelError(
    'SECRETS_KEY_MISSING',
    `the database holds secrets encrypted under key ${missing.join(', ')} and ${given}: set TETHER_SECRETS_KEY or TETHER_SECRETS_KEY_FILE to the keys of this cluster (docs/operations.md, "Secrets key")`,
  );
}
