// The part of the static config that makes Caddy write what its certificate
// issuance does (ACME orders, challenges, the CA's errors, certificates
// obtained) as JSON lines to a file the agent follows
// (route-probes/issuance-log.ts): the CA's own words then reach the route's
// certificate status instead of staying in Caddy's log. Settings only: no
// domain is ever named here.

import path from 'node:path';
import { CADDY_CONTAINER } from './caddy-image.js';

/** Caddy 2.6.2's loggers of certificate issuance (checked by running it against pebble; `include` matches by prefix). */
export const ISSUANCE_LOGGERS = ['tls.obtain', 'tls.renew', 'tls.issuance', 'tls.on_demand', 'http.acme_client'] as const;

/** Rolled at this size with one old file kept: the log never takes more than about twice this on disk. */
export const ISSUANCE_LOG_ROLL_MB = 1;

/** Caddy's `logging` for the issuance log at `file` (a path as Caddy sees it). */
export function issuanceLogging(file: string) {
  return {
    logs: {
      'tether-issuance': {
        writer: { output: 'file', filename: file, roll_size_mb: ISSUANCE_LOG_ROLL_MB, roll_keep: 1, roll_gzip: false },
        encoder: { format: 'json' },
        include: [...ISSUANCE_LOGGERS],
      },
    },
  };
}

/**
 * Container mode (for the static config there): Caddy writes inside its bind-mounted data folder, the agent
 * reads the host side of the same file (`hostDataDir` = caddyHostPaths(hostDir).dataDir). External mode uses
 * TETHER_PROXY_ISSUANCE_LOG for both.
 */
export function containerIssuanceLog(hostDataDir: string): { caddyPath: string; agentPath: string } {
  return { caddyPath: path.posix.join(CADDY_CONTAINER.dataDir, 'logs', 'issuance.log'), agentPath: path.join(hostDataDir, 'logs', 'issuance.log') };
}
