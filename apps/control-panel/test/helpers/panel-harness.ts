import type { FastifyInstance } from 'fastify';
import { startTestPostgres, type TestPostgres } from '@tether/testkit';
import { buildApp } from '../../src/app.js';
import { loadConfig, type PanelConfig } from '../../src/config.js';
import { createPrisma, MIGRATIONS_DIR, type Db } from '../../src/db/database.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { PanelEvents } from '../../src/panel-events.js';
import { generateToken, hashToken } from '../../src/domain/tokens.js';
import { PrismaSessionStore, type SessionStore } from '../../src/sessions/session-store.js';

// A real panel for session tests: real PostgreSQL, real HTTP and WebSocket on
// a free port, short deadlines from the environment the test passes.

export interface Panel {
  app: FastifyInstance;
  url: string;
  port: number;
  prisma: Db;
  config: PanelConfig;
  events: PanelEvents;
  operatorToken: string;
  createNode(name: string): Promise<{ id: string; name: string; token: string }>;
  createService(nodeId: string, name?: string): Promise<{ id: string; teamId: string; name: string }>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read answers ad hoc
  api(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: any; ms: number }>;
  /** Stops the HTTP side only (a panel restart keeps the database). */
  stopApp(): Promise<void>;
  /** Starts a new app on the same port and database, like a panel restart. */
  restartApp(): Promise<void>;
  close(): Promise<void>;
}

export async function startPanel(options: { env?: Record<string, string>; wrapStore?: (store: SessionStore) => SessionStore; pg?: TestPostgres } = {}): Promise<Panel> {
  const ownPg = !options.pg;
  const pg = options.pg ?? (await startTestPostgres());
  const databaseUrl = ownPg ? pg.url : await pg.createDatabase();
  await applyMigrations(databaseUrl, MIGRATIONS_DIR);
  const prisma = createPrisma(databaseUrl);
  const config = loadConfig({ DATABASE_URL: databaseUrl, TETHER_LOG_LEVEL: 'silent', ...options.env });
  const operatorToken = generateToken('operator');
  await prisma.apiToken.create({ data: { name: 'test operator', role: 'operator', tokenHash: hashToken(operatorToken) } });
  const team = await prisma.team.create({ data: { name: `team-${Date.now()}-${Math.round(Math.random() * 1e6)}` } });
  const events = new PanelEvents();

  let app: FastifyInstance;
  let port = 0;
  const launch = async () => {
    const store = new PrismaSessionStore(prisma);
    app = await buildApp({ config, prisma, events, sessionStore: options.wrapStore ? options.wrapStore(store) : store });
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
    events,
    operatorToken,
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
    async stopApp() {
      await app.close();
    },
    async restartApp() {
      await launch();
    },
    async close() {
      await app.close();
      await prisma.$disconnect();
      if (ownPg) await pg.stop();
    },
  };
  return panel;
}
