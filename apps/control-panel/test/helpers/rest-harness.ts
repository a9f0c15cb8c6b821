import type { FastifyInstance } from 'fastify';
import { startTestPostgres, type TestPostgres } from '@tether/testkit';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createPrisma, MIGRATIONS_DIR, type Db } from '../../src/db/database.js';
import { applyMigrations } from '../../src/db/migrate.js';
import type { DeploymentDispatcher } from '../../src/dispatch/session-dispatcher.js';
import { PanelEvents, type PanelEventMap } from '../../src/panel-events.js';
import { generateToken, hashToken } from '../../src/domain/tokens.js';

/** The REST tests' dispatcher: the deployment stays `pending` (201), as if no session layer existed. */
export const recordOnlyDispatcher: DeploymentDispatcher = {
  async dispatch() {
    return { httpStatus: 201 };
  },
};

// A panel for REST tests: real PostgreSQL (one server per test file), the
// real app on a free port, answers read over real HTTP.

export interface Answer {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON of any shape, asserted by each test
  headers: Headers;
}

export interface RecordedEvent {
  name: keyof PanelEventMap;
  payload: unknown;
}

export interface RestPanel {
  app: FastifyInstance;
  prisma: Db;
  events: PanelEvents;
  /** Every PanelEvents emission since the last `events.length = 0`. */
  emitted: RecordedEvent[];
  operator: string;
  /** The PostgreSQL server (shared with other panels when one was passed in). */
  pg: TestPostgres;
  call(method: string, path: string, options?: { token?: string | null; body?: unknown; headers?: Record<string, string> }): Promise<Answer>;
  /** A team and a customer token for it, made through the API. */
  team(name: string): Promise<{ id: string; token: string }>;
  /** A node made through the API. */
  node(name: string): Promise<{ id: string; name: string; token: string }>;
  close(): Promise<void>;
}

let shared: Promise<TestPostgres> | undefined;

/**
 * One PostgreSQL server for all the REST suites of a test file (each suite
 * still gets its own fresh database): starting a server costs seconds, a
 * database a fraction of one. Stop it with `stopSharedPostgres()` in the
 * file's afterAll.
 */
export function sharedPostgres(): Promise<TestPostgres> {
  shared ??= startTestPostgres();
  return shared;
}

export async function stopSharedPostgres(): Promise<void> {
  const server = shared;
  shared = undefined;
  await (await server)?.stop();
}

export interface RestPanelOptions {
  /** Default: record only (deployments stay pending), so REST tests do not depend on live agent sessions. */
  dispatcher?: DeploymentDispatcher;
  env?: Record<string, string>;
  /** Share this server (a fresh database on it) instead of starting one. */
  pg?: TestPostgres;
}

export async function startRestPanel(options: RestPanelOptions = {}): Promise<RestPanel> {
  const pg: TestPostgres = options.pg ?? (await startTestPostgres());
  const url = options.pg ? await options.pg.createDatabase() : pg.url;
  await applyMigrations(url, MIGRATIONS_DIR);
  const prisma = createPrisma(url);
  const operator = generateToken('operator');
  await prisma.apiToken.create({ data: { name: 'test operator', role: 'operator', tokenHash: hashToken(operator) } });
  const events = new PanelEvents();
  const emitted: RecordedEvent[] = [];
  for (const name of ['routing.changed', 'workloads.changed', 'node.decommissioned'] as const) {
    events.on(name, (payload: unknown) => emitted.push({ name, payload }));
  }
  const config = loadConfig({ DATABASE_URL: url, TETHER_LOG_LEVEL: 'silent', ...options.env });
  const app = await buildApp({ config, prisma, events, dispatcher: options.dispatcher ?? recordOnlyDispatcher });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;

  const call: RestPanel['call'] = async (method, path, opts = {}) => {
    const token = opts.token === undefined ? operator : opts.token;
    const headers: Record<string, string> = { ...(token ? { authorization: `Bearer ${token}` } : {}), ...opts.headers };
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(base + path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      /* not JSON (the docs page) */
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };

  const expectStatus = (answer: Answer, status: number, what: string) => {
    if (answer.status !== status) throw new Error(`${what}: expected ${status}, got ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body;
  };

  return {
    app,
    prisma,
    events,
    emitted,
    operator,
    pg,
    call,
    async team(name) {
      const team = expectStatus(await call('POST', '/v1/teams', { body: { name } }), 201, 'create team');
      const token = expectStatus(await call('POST', `/v1/teams/${team.id}/tokens`, { body: { name: `${name} ci` } }), 201, 'create token');
      return { id: team.id, token: token.token };
    },
    async node(name) {
      return expectStatus(await call('POST', '/v1/nodes', { body: { name } }), 201, 'create node');
    },
    async close() {
      await app.close();
      await prisma.$disconnect();
      if (!options.pg) await pg.stop();
    },
  };
}

/** Asserts the error shape and code of an answer. */
export function errorOf(answer: Answer): { status: number; code: string; message: string } {
  const error = (answer.body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  if (!error || typeof error.code !== 'string' || typeof error.message !== 'string') {
    throw new Error(`not an error body: ${answer.status} ${JSON.stringify(answer.body)}`);
  }
  return { status: answer.status, code: error.code, message: error.message };
}

/** errorOf of an answer still on its way: `expect(await code(p.call(…))).toMatchObject({ status, code })`. */
export const code = async (answer: Promise<Answer>) => errorOf(await answer);
