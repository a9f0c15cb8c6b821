import type { Logger } from 'pino';

// Every failure of the proxy path carries a stable code, so routing.applied
// and the logs say what went wrong without parsing prose.

export const PROXY_ERROR_CODES = [
  /** Nothing answers on the admin address (refused, reset, socket missing). */
  'PROXY_UNREACHABLE',
  /** The admin API did not answer within the timeout. */
  'PROXY_TIMEOUT',
  /** Caddy refused the config (POST /load answered 4xx); the old config keeps running. */
  'PROXY_REJECTED_CONFIG',
  /** The admin API answered something unexpected (status or body). */
  'PROXY_ADMIN_ERROR',
  /** A route the renderer will not turn into config (bad domain, path prefix or upstream). */
  'PROXY_INVALID_ROUTE',
  /** The map's hash is not the hash of its routes. */
  'PROXY_HASH_MISMATCH',
  /** The config file or the state file could not be written. */
  'PROXY_WRITE_FAILED',
  /** The Caddy container or its image could not be made to run. */
  'PROXY_CONTAINER_FAILED',
] as const;

export type ProxyErrorCode = (typeof PROXY_ERROR_CODES)[number];

export class ProxyError extends Error {
  constructor(
    readonly code: ProxyErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ProxyError';
  }
}

/** `CODE: message`, the form routing.applied carries in `error`. */
export function describeProxyError(error: unknown): string {
  if (error instanceof ProxyError) return `${error.code}: ${error.message}`;
  return `PROXY_ADMIN_ERROR: ${error instanceof Error ? error.message : String(error)}`;
}

/** The part of pino's logger the proxy code uses; tools and benchmarks can pass a stub. */
export type ProxyLogger = Pick<Logger, 'info' | 'warn' | 'error'>;
