import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { buildApp, type AppDependencies } from './app.js';
import type { PanelConfig } from './config.js';
import { openDatabase, type Database } from './db/database.js';
import { dialableUrl } from './http/internal-listener.js';
import { DOCS_PATH } from './http/openapi.js';
import { backlogWarning, readSomaxconn } from './listen-backlog.js';
import { ensureAdminToken, type AdminTokenResult } from './domain/admin-token.js';
import { refuseUnreadableSecrets } from './secrets/key-check.js';
import { loadKeyring } from './secrets/keyring.js';

// Starting a panel: database (embedded or DATABASE_URL, migrated), the first
// operator token, the HTTP app. main.ts adds configuration and signals; tests
// call this directly to restart a panel on the same data directory.

export interface RunningPanel {
  app: FastifyInstance;
  db: Database;
  url: string;
  adminToken: AdminTokenResult;
  close(): Promise<void>;
}

export interface StartOptions {
  logger?: FastifyBaseLogger;
  /** Where the one-time token banner and the listening line go (console.log in main.ts). */
  print?: (text: string) => void;
  /** Extra dependencies for buildApp (tests: a dispatcher, events). */
  extra?: Omit<AppDependencies, 'config' | 'prisma' | 'logger'>;
}

export function adminTokenBanner(token: string): string {
  const rule = '─'.repeat(72);
  return [
    rule,
    'Tether generated the first operator token. It is shown this once; only its hash is stored.',
    '',
    `    ${token}`,
    '',
    'Send it as "Authorization: Bearer <token>". To choose your own, set TETHER_ADMIN_TOKEN.',
    rule,
  ].join('\n');
}

/** Compares the fleet with the accept queue (see listen-backlog.ts); a failed count is only logged. */
async function warnOfShortBacklog(db: Database, backlog: number, log: FastifyBaseLogger | undefined): Promise<void> {
  try {
    const nodes = await db.prisma.node.count({ where: { decommissioned: false } });
    const somaxconn = readSomaxconn();
    const warning = backlogWarning(nodes, backlog, somaxconn);
    if (warning) log?.warn({ nodes, backlog, somaxconn }, warning);
  } catch (err) {
    log?.debug({ err }, 'could not count nodes for the accept queue check');
  }
}

/**
 * TETHER_INTERNAL_LISTEN: the internal surface's own listener; other panels are told its address unless
 * TETHER_PANEL_INTERNAL_URL says where they reach it. Returns the URL it listens on.
 */
async function listenInternal(app: FastifyInstance, config: PanelConfig): Promise<string | undefined> {
  const at = config.http.internalListen;
  if (!at || !app.internalListener) return undefined;
  const bound = await app.internalListener.listen(at);
  const url = dialableUrl(bound);
  if (url && app.cluster && !config.panel.internalUrl) app.cluster.lease.setInternalUrl(url);
  return url ?? `http://${at.host}:${bound.port}`;
}

export async function startPanel(config: PanelConfig, options: StartOptions = {}): Promise<RunningPanel> {
  const print = options.print ?? (() => {});
  const log = options.logger;
  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    embeddedPort: config.embeddedPgPort,
    // The pool's bounds are the configured ones (without them a frozen database took the defaults' 10 s).
    limits: config.db,
    log: { info: (m) => log?.info(m), warn: (m) => log?.warn(m) },
  });
  log?.info({ embedded: Boolean(db.embedded), applied: db.migrations.applied }, 'database ready');
  let app: FastifyInstance | undefined;
  try {
    // A panel that cannot open the secrets it holds starts nothing (main.ts: one line, exit 2).
    const keyring = loadKeyring(config.secretsKeys);
    await refuseUnreadableSecrets(db.prisma, keyring);
    const adminToken = await ensureAdminToken(db.prisma, config.adminToken);
    if (adminToken.kind === 'generated') print(adminTokenBanner(adminToken.token));
    app = await buildApp({ ...options.extra, config, prisma: db.prisma, databaseUrl: db.url, keyring, ...(log ? { logger: log } : {}) });
    const address = await app.listen({ host: config.host, port: config.port, backlog: config.listenBacklog });
    const internalUrl = await listenInternal(app, config);
    await warnOfShortBacklog(db, config.listenBacklog, log);
    const url = config.publicUrl ?? address.replace('0.0.0.0', '127.0.0.1');
    print(`Tether control panel listening on ${url} (API docs: ${url}${DOCS_PATH})`);
    if (internalUrl) print(`Internal surface for other panels on ${internalUrl}/internal/v1`);
    const running = app;
    return {
      app: running,
      db,
      url,
      adminToken,
      async close() {
        await running.close();
        await db.close();
      },
    };
  } catch (err) {
    await app?.close();
    await db.close();
    throw err;
  }
}
