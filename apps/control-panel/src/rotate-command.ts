import { ConfigError } from '@tether/common';
import { loadConfig } from './config.js';
import { createPrisma } from './db/database.js';
import { PanelError } from './errors.js';
import { loadKeyring } from './secrets/keyring.js';
import { missingKeyIds, reencryptAll } from './secrets/sealed-rows.js';

// `node dist/rotate-secrets.js` (docs/operations.md, "Secrets key"): with the
// new key first in TETHER_SECRETS_KEY (or the key file) and the old ones
// after it, re-encrypts every sealed row (service secrets, registry passwords,
// shared certificate keys: secrets/sealed-rows.ts) under the new key. Safe to run
// again, and while panels serve: rows move in locked batches.

/** Runs the rotation against the database the environment names; resolves with the exit code. */
export async function rotateSecrets(env: Record<string, string | undefined>, print: (line: string) => void): Promise<0 | 1 | 2> {
  let config;
  let keyring;
  try {
    config = loadConfig(env);
    keyring = loadKeyring(config.secretsKeys);
  } catch (err) {
    if (err instanceof ConfigError || err instanceof PanelError) {
      print(`✖ ${err.message}`);
      return 2;
    }
    throw err;
  }
  if (!config.databaseUrl) {
    print('✖ DATABASE_URL is not set: the rotation runs against the database the panels share');
    return 2;
  }
  if (!keyring) {
    print('✖ no key: set TETHER_SECRETS_KEY (or TETHER_SECRETS_KEY_FILE) to the new key, then the old ones, comma-separated (one a line in the file)');
    return 2;
  }
  const prisma = createPrisma(config.databaseUrl, config.db);
  try {
    const missing = await missingKeyIds(prisma, keyring);
    if (missing.length > 0) {
      print(`✖ rows are encrypted under key ${missing.join(', ')}, which is not given: list the old key after the new one`);
      return 2;
    }
    const moved = await reencryptAll(prisma, keyring);
    const left = (await missingKeyIds(prisma, keyring)).length;
    const counts = moved.map((m) => `${m.moved} ${m.label} row(s)`);
    print(`re-encrypted ${counts.slice(0, -1).join(', ')} and ${counts.at(-1)} under key ${keyring.activeKeyId}${left === 0 ? '' : `; ${left} key id(s) still unknown`}`);
    return 0;
  } catch (err) {
    print(`✖ rotation stopped: ${err instanceof Error ? err.message : String(err)}; rows already moved stay readable with the new key, run it again`);
    return 1;
  } finally {
    await prisma.$disconnect();
  }
}
