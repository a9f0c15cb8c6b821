import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CliError } from './errors.js';
import type { CliEnv } from './env.js';

// The panel URL and API token `tether login` stores: one JSON file in the
// user's config folder, mode 0600 in a 0700 folder, written to a temp file
// and renamed so a crash never leaves half a token.

export interface Credentials {
  url: string;
  token: string;
}

export const credentialsPath = (env: CliEnv) => path.join(env.configDir, 'credentials.json');

export function loadCredentials(env: CliEnv): Credentials | null {
  let stored: Partial<Credentials> = {};
  try {
    stored = JSON.parse(readFileSync(credentialsPath(env), 'utf8')) as Partial<Credentials>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new CliError('CONFIG_UNREADABLE', `cannot read ${credentialsPath(env)}: ${(err as Error).message}`, { cause: err });
    }
  }
  const url = env.url ?? stored.url;
  const token = env.token ?? stored.token;
  return typeof url === 'string' && typeof token === 'string' ? { url, token } : null;
}

export function saveCredentials(env: CliEnv, credentials: Credentials): string {
  const file = credentialsPath(env);
  try {
    mkdirSync(env.configDir, { recursive: true, mode: 0o700 });
    const temp = `${file}.${process.pid}.tmp`;
    writeFileSync(temp, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
    // The mode given to writeFileSync is masked by the umask; make sure.
    chmodSync(temp, 0o600);
    renameSync(temp, file);
  } catch (err) {
    throw new CliError('CONFIG_UNREADABLE', `cannot write ${file}: ${(err as Error).message}`, { cause: err });
  }
  return file;
}
