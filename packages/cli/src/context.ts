import { ApiClient } from './api-client.js';
import { loadCredentials } from './credentials.js';
import type { CliEnv } from './env.js';
import { CliError, usage } from './errors.js';
import type { Output } from './output.js';

/** What every command gets. */
export interface Context {
  env: CliEnv;
  out: Output;
  /** The API client for the stored (or TETHER_URL/TETHER_TOKEN) credentials; NOT_LOGGED_IN without them. */
  client(): ApiClient;
  /** Aborts on SIGINT/SIGTERM: long commands (logs -f, deploy --wait) end cleanly. */
  signal: AbortSignal;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
}

export function clientFor(env: CliEnv): ApiClient {
  const credentials = loadCredentials(env);
  if (!credentials) throw new CliError('NOT_LOGGED_IN', 'not logged in: run `tether login <url>` (or set TETHER_URL and TETHER_TOKEN)');
  return new ApiClient(credentials);
}

export interface Service {
  id: string;
  teamId: string;
  name: string;
  image: string;
  internalPort: number | null;
  replicas: number;
  /** Null while no node was eligible for it (its replicas pending). */
  nodeName: string | null;
}

/** A service by id or by name among those the token sees; a name several teams use must be given as an id. */
export async function resolveService(client: ApiClient, ref: string): Promise<Service> {
  const { body } = await client.call<Service[]>('GET', '/v1/services');
  const byId = body.find((s) => s.id === ref);
  if (byId) return byId;
  const named = body.filter((s) => s.name === ref);
  if (named.length === 1) return named[0]!;
  if (named.length > 1) throw usage(`${named.length} services are named ${ref} (in different teams): give its id (${named.map((s) => s.id).join(', ')})`);
  throw new CliError('API_ERROR', `NOT_FOUND: no service ${ref} (see \`tether services\`)`, { apiCode: 'NOT_FOUND' });
}

/** Positional argument `index` or a usage error naming it. */
export function positional(args: string[], index: number, name: string): string {
  const value = args[index];
  if (value === undefined || value === '') throw usage(`missing <${name}>`);
  return value;
}
