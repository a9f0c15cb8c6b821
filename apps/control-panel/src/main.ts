import { runMain } from '@tether/common';
import { createLogger } from '@tether/common/logging';
import { isEmbeddedPostgresError, type StartupErrorCode } from '@tether/embedded-postgres';
import { loadConfig, type PanelConfig } from './config.js';
import { PanelError } from './errors.js';
import { startPanel } from './server.js';

// Reads configuration, starts the panel (server.ts) and stops it on a signal.
// A start that fails for a cause the operator can fix (port taken, disk full,
// data directory of another user) is one line and exit 2, like a bad config.

/** Which setting the fix in an embedded PostgreSQL error is about. */
const SETTING: Record<StartupErrorCode, string> = {
  PG_PORT_IN_USE: ' (TETHER_EMBEDDED_PG_PORT)',
  PG_DISK_FULL: ' (TETHER_DATA_DIR)',
  PG_DATA_DIR_OWNER: ' (TETHER_DATA_DIR)',
  PG_DATA_DIR_IN_USE: ' (TETHER_DATA_DIR)',
  PG_START_FAILED: '',
};

/** The one-line reason a start failed when the operator can fix it, else undefined. */
function fixableStartFailure(err: unknown, config: PanelConfig): string | undefined {
  if (isEmbeddedPostgresError(err)) return `${err.message}${SETTING[err.code]}`;
  if (err instanceof PanelError && (err.code === 'SECRETS_KEY_MISSING' || err.code === 'SECRETS_KEY_INVALID')) return err.message;
  const e = err as NodeJS.ErrnoException;
  if (e?.code === 'EADDRINUSE') return `the panel's port ${config.host}:${config.port} is taken by another process; stop it or set TETHER_PORT to a free port`;
  if (e?.code === 'EACCES' && e.syscall === 'listen') return `no permission to listen on ${config.host}:${config.port}; choose a port above 1023 (TETHER_PORT) or run with that capability`;
  if (e?.code === 'ENOSPC') return `the disk holding ${config.dataDir} is full; free some space or set TETHER_DATA_DIR to a folder on another disk`;
  return undefined;
}

runMain(
  () => loadConfig(process.env),
  async (config) => {
    const logger = createLogger({ level: config.logLevel, format: config.logFormat });
    let panel;
    try {
      panel = await startPanel(config, { logger, print: (text) => console.log(text) });
    } catch (err) {
      const line = fixableStartFailure(err, config);
      if (line === undefined) throw err;
      console.error(`✖ ${line}`);
      process.exit(2);
    }
    const pgServer = panel.db.embedded;
    if (pgServer) {
      console.log(`Embedded PostgreSQL: data in ${pgServer.dataDir}, binaries in ${pgServer.binDir}, running as OS user ${pgServer.osUser} on 127.0.0.1:${pgServer.port}`);
    }
    const running = panel;
    return {
      async stop(signal) {
        logger.info({ signal }, 'shutting down');
        await running.close();
      },
    };
  },
);
