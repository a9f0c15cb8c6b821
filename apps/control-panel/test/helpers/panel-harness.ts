import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { startTestPostgres, waitFor, type TestPostgres } from '@tether/testkit';
import { buildApp } from '../../src/app.js';
import { loadConfig, type PanelConfig } from '../../src/config.js';
import { createPrisma, MIGRATIONS_DIR, type Db } from '../../src/db/database.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { PanelEvents } from '../../src/panel-events.js';
import { generateToken, hashToken } from '../../src/domain/tokens.js';
import type { SessionStore } from '../../src/session-writes/session-store.js';

// A real panel for session tests: real PostgreSQL, real HTTP and WebSocket on
// a free port, short deadlines from the environment the test passes.

export interface Panel {
  app: FastifyInstance;
  url: string;
  port: number;
  prisma: Db;
  config: PanelConfig;
  /** The panel's data folder (the outbox spill file lives here). */
  dataDir: string;
  events: PanelEvents;
  operatorToken: string;
  /** The panel's last warnings and errors (its own logger only), newest last: evidence for a test's failure message. */
  recentLogs(): string;
  createNode(name: string): Promise<{ id: string; name: string; token: string }>;
  createService(nodeId: string, name?: string): Promise<{ id: string; teamId: string; name: string }>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read answers ad hoc
  api(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: any; ms: number }>;
  /** Resolves once every session fact queued so far has been written (the outbox is empty). */
  settled(): Promise<void>;
  /** Stops the HTTP side only (a panel restart keeps the database). */
  stopApp(): Promise<void>;
  /** Starts a new app on the same port and database, like a panel restart. */
  restartApp(): Promise<void>;
  close(): Promise<void>;
}

export interface PanelOptions {
  env?: Record<string, string>;
  wrapStore?: (store: SessionStore) => SessionStore;
  /** A server to make this panel's database on (else one of its own). */
  pg?: Pick<TestPostgres, 'createDatabase'>;
  /** A database to use as it is (fault tests: a server they stop and freeze). */
  databaseUrl?: string;
  /** The data folder; a fresh temporary one when absent (deleted on close). */
  dataDir?: string;
  /** The app's logger (default: warnings and errors kept in memory, see Panel.recentLogs). */
  logger?: FastifyBaseLogger;
}

const KEPT_LOG_LINES = 50;

/** A logger that keeps the last warnings and errors in memory instead of printing them. */
function ringLogger(): { logger: FastifyBaseLogger; lines: string[] } {
  const lines: string[] = [];
  const logger = pino(
    { level: 'warn' },
    {
      write(line: string) {
        lines.push(line.trimEnd());
        if (lines.length > KEPT_LOG_LINES) lines.shift();
      },
    },
  );
  return { logger, lines };
}

export async function startPanel(options: PanelOptions = {}): Promise<Panel> {
  const ownPg = !options.pg && !options.databaseUrl ? await startTestPostgres() : undefined;
  const databaseUrl = options.databaseUrl ?? (ownPg ? ownPg.url : await options.pg!.createDatabase());
  const ownDataDir = !options.dataDir;
  const dataDir = options.dataDir ?? (await mkdtemp(path.join(os.tmpdir(), 'tether-panel-')));
  await applyMigrations(databaseUrl, MIGRATIONS_DIR);
  const config = loadConfig({ DATABASE_URL: databaseUrl, TETHER_LOG_LEVEL: 'silent', TETHER_DATA_DIR: dataDir, ...options.env });
  const prisma = createPrisma(databaseUrl, config.db);
  const operatorToken = generateToken('operator');
  await prisma.apiToken.create({ data: { name: 'test operator', role: 'operator', tokenHash: hashToken(operatorToken) } });
  const team = await prisma.team.create({ data: { name: `team-${Date.now()}-${Math.round(Math.random() * 1e6)}` } });
  const events = new PanelEvents();
  const ring = options.logger ? undefined : ringLogger();
  const logger = options.logger ?? ring!.logger;

  let app: FastifyInstance;
  let port = 0;
  const launch = async () => {
    app = await buildApp({ config, prisma, events, ...(options.wrapStore ? { wrapSessionStore: options.wrapStore } : {}), logger });
    await app.listen({ host: '127.0.0.1', port });
    port = (app.server.address() as { port: number }).port;
  };
  await launch();

  const panel: Panel = {
    get app() {
      return app;
    },
    get url() {
      return `http://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    prisma,
    config,
    dataDir,
    events,
    operatorToken,
    recentLogs: () => (ring ? ring.lines.join('\n') : '(the test passed its own logger)'),
    async createNode(name) {
      const token = generateToken('node');
      const node = await prisma.node.create({ data: { name, tokenHash: hashToken(token) } });
      return { id: node.id, name, token };
    },
    async createService(nodeId, name = `svc${Math.round(Math.random() * 1e9)}`) {
      const service = await prisma.service.create({
        data: { teamId: team.id, name, image: 'tether-test/busybox:1', internalPort: 8080, replicas: 1, nodeId },
      });
      return { id: service.id, teamId: team.id, name };
    },
    async api(method, path, body, token = operatorToken) {
      const started = performance.now();
      const res = await fetch(`http://127.0.0.1:${port}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null, ms: performance.now() - started };
    },
    async settled() {
      await waitFor(() => app.panelStatus.outbox.pending === 0);
    },
    async stopApp() {
      await app.close();
    },
    async restartApp() {
      await launch();
    },
    async close() {
      await app.close();
      await prisma.$disconnect();
      if (ownPg) await ownPg.stop();
      if (ownDataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
  return panel;
}

export interface PanelGroup {
  pg: TestPostgres;
  databaseUrl: string;
  panels: Panel[];
  close(): Promise<void>;
}

/**
 * Panels on one new database of one test PostgreSQL (several panels, issue 10), ids `panel-<id>`; resolves once
 * each has written, with its lease, the internal URL it listens on.
 */
export async function startPanels(ids: readonly string[], env: Record<string, string>): Promise<PanelGroup> {
  const pg = await startTestPostgres();
  const databaseUrl = await pg.createDatabase();
  const panels = await Promise.all(ids.map((id) => startPanel({ databaseUrl, env: { ...env, TETHER_PANEL_ID: `panel-${id}` } })));
  await waitFor(async () => (await panels[0]!.prisma.panel.count({ where: { internalUrl: { not: null }, internalSecretHash: { not: null } } })) === ids.length);
  return {
    pg,
    databaseUrl,
    panels,
    async close() {
      await Promise.all(panels.map((p) => p.close()));
      await pg.stop();
    },
  };
}

/**
 * startPanels for a test file: started before its tests; `cleanup` (newest first), then the panels, after them.
 * `panels` stand for the panels once started (each forwards to its panel), so a file can name them at its top.
 */
export function usePanels(ids: readonly string[], env: Record<string, string>) {
  let group: PanelGroup | undefined;
  const cleanup: (() => unknown)[] = [];
  beforeAll(async () => {
    group = await startPanels(ids, env);
  }, 60_000);
  afterAll(async () => {
    for (const f of cleanup.reverse()) await f();
    await group?.close();
  });
  const started = () => {
    if (!group) throw new Error('the panels have not started yet');
    return group;
  };
  const panels = ids.map((_, i) => new Proxy({} as Panel, { get: (_t, key) => Reflect.get(started().panels[i]!, key) }));
  return { panels, cleanup, databaseUrl: () => started().databaseUrl };
}
