import os from 'node:os';
import path from 'node:path';

// The one place the CLI reads the environment (docs/cli.md lists each variable).

export interface CliEnv {
  /** Where credentials.json lives. */
  configDir: string;
  /** Override the stored panel URL and token (CI jobs). */
  url: string | undefined;
  token: string | undefined;
}

export function readCliEnv(env: Record<string, string | undefined> = process.env): CliEnv {
  const xdg = env.XDG_CONFIG_HOME?.trim() || path.join(os.homedir(), '.config');
  return {
    configDir: env.TETHER_CONFIG_DIR?.trim() || path.join(xdg, 'tether'),
    url: env.TETHER_URL?.trim() || undefined,
    token: env.TETHER_TOKEN?.trim() || undefined,
  };
}
