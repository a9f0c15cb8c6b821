import { CodedError, defineErrorCatalog, errorMessage } from '@tether/common';

// Every failure of the proxy path carries a stable code (part of the agent's
// catalog in src/errors.ts), so routing.applied and the logs say what went
// wrong without parsing prose.

export const PROXY_ERROR_CATALOG = defineErrorCatalog({
  PROXY_UNREACHABLE: 'nothing answers on the admin address (refused, reset, socket missing)',
  PROXY_TIMEOUT: 'the admin API did not answer within the timeout',
  PROXY_REJECTED_CONFIG: 'Caddy refused the config (POST /load answered 4xx); the old config keeps running',
  PROXY_ADMIN_ERROR: 'the admin API answered something unexpected (status or body)',
  PROXY_INVALID_ROUTE: 'a route the renderer will not turn into config (bad domain, path prefix or upstream)',
  PROXY_HASH_MISMATCH: "the map's hash is not the hash of its routes",
  PROXY_WRITE_FAILED: 'the config file or the state file could not be written',
  PROXY_CONTAINER_FAILED: 'the Caddy container or its image could not be made to run',
  PROXY_ANSWERER_FAILED: 'the answerer (knotd) is not answering and could not be started',
  PROXY_ANSWERER_REJECTED: 'the answerer refused the new zone; it keeps serving the last good one',
  PROXY_ANSWERS_UNPUBLISHED: 'the static config waits: the answers for the routes in place are not published yet (Caddy keeps what it serves)',
});

export type ProxyErrorCode = keyof typeof PROXY_ERROR_CATALOG;

export class ProxyError extends CodedError<ProxyErrorCode> {}

/** `CODE: message`, the form routing.applied carries in `error`. */
export function describeProxyError(error: unknown): string {
  if (error instanceof ProxyError) return `${error.code}: ${error.message}`;
  return `PROXY_ADMIN_ERROR: ${errorMessage(error)}`;
}
