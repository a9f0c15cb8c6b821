import { Prisma } from '../generated/prisma/client.js';
import { NotPrimaryError } from './primary-locator.js';

// Which errors mean "the database cannot answer now" (down, frozen, restarting,
// out of connections, a client-side deadline passed) as opposed to a bug or a
// constraint. Those become 503 DATABASE_UNAVAILABLE with Retry-After, make
// the session-fact outbox keep its facts and retry, and never reach a client
// with their driver text (the logs keep it).

/** Prisma codes for a database that cannot be reached or did not answer in time. */
const PRISMA_UNAVAILABLE = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024', 'P2028']);
/** Driver-adapter error kinds (@prisma/adapter-pg) that say the same. */
const ADAPTER_UNAVAILABLE = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections', 'TlsConnectionError']);
/** Node socket errors. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
/**
 * PostgreSQL SQLSTATEs: class 08 connection exceptions, 57P01-57P03 shutdown
 * and recovery, 57014 statement timeout, 53300 too many connections, 25006 a
 * write on a server that is read-only (a standby: not the primary, reconnect).
 */
const PG_UNAVAILABLE = /^(08...|57P0[1-3]|57014|53300|25006)$/;
/** node-postgres and pg-pool say these with plain Errors (no code). */
const DRIVER_MESSAGES = [
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'Connection terminated',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'connect ECONNREFUSED',
  "Can't reach database server",
  'Timed out fetching a new connection',
  'Unable to start a transaction in the given time',
  'cannot be executed on an expired transaction',
  'the database system is',
  'terminating connection',
];

/** `err` and what it wraps: Prisma's driver-adapter error, then each `cause`. */
function* causeChain(err: unknown): Generator<object> {
  const seen = new Set<unknown>();
  let current: unknown = err;
  while (current && typeof current === 'object' && !seen.has(current)) {
    seen.add(current);
    yield current;
    const e = current as { meta?: { driverAdapterError?: unknown }; cause?: unknown };
    current = e.meta?.driverAdapterError ?? e.cause;
  }
}

/** The codes an error in the chain carries: Prisma's, the adapter's SQLSTATE and the original one. */
function codesOf(e: object): string[] {
  const { code, originalCode, meta } = e as { code?: unknown; originalCode?: unknown; meta?: { code?: unknown } };
  return [code, originalCode, meta?.code].filter((c): c is string => typeof c === 'string');
}

/**
 * True when the server reached is not the primary: a read-only answer (25006), or the primary check on connect
 * (primary-locator.ts) refused it. Also unavailable; answered 503 DATABASE_NOT_PRIMARY.
 */
export function isNotPrimary(err: unknown): boolean {
  for (const current of causeChain(err)) {
    if (current instanceof NotPrimaryError) return true;
    if (codesOf(current).includes('25006')) return true;
  }
  return false;
}

/** True when `err` (or anything in its cause chain) says the database is unreachable, frozen or out of time. */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (const current of causeChain(err)) {
    if (current instanceof DatabaseUnavailableError || current instanceof NotPrimaryError) return true;
    if (current instanceof Prisma.PrismaClientInitializationError) return true;
    const e = current as { code?: unknown; kind?: unknown; message?: unknown };
    if (typeof e.code === 'string' && (PRISMA_UNAVAILABLE.has(e.code) || SOCKET_CODES.has(e.code) || PG_UNAVAILABLE.test(e.code))) return true;
    if (typeof e.kind === 'string' && ADAPTER_UNAVAILABLE.has(e.kind)) return true;
    if (typeof e.message === 'string' && DRIVER_MESSAGES.some((m) => (e.message as string).includes(m))) return true;
  }
  return false;
}

/**
 * True when the database itself refused a statement for good: a constraint,
 * a missing row, bad data (Prisma P2xxx request errors other than pool and
 * transaction timeouts, SQLSTATE classes 22 and 23). Retrying cannot help.
 * Anything else that is not "unavailable" is treated as transient by the
 * session-fact writer, which keeps and retries it rather than lose a row.
 */
export function isPermanentDatabaseError(err: unknown): boolean {
  if (isDatabaseUnavailable(err)) return false;
  for (const current of causeChain(err)) {
    if (codesOf(current).some((code) => /^P2\d{3}$/.test(code) || /^2[23][0-9A-Z]{3}$/.test(code))) return true;
  }
  return false;
}

/**
 * True when PostgreSQL refused a value it cannot store as text: a NUL byte or
 * bad encoding in text (22021) or in jsonb (22P05). The caller sent it, so it
 * is a 400, never a 500 (request-guards.ts refuses most before they get here).
 */
export function isUnstorableText(err: unknown): boolean {
  for (const current of causeChain(err)) if (codesOf(current).some((code) => code === '22021' || code === '22P05')) return true;
  return false;
}

/** Thrown by the panel's own deadlines around the database (readiness probe). */
export class DatabaseUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DatabaseUnavailableError';
  }
}

/** Rejects with DatabaseUnavailableError when `work` has not settled within `ms`. */
export async function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DatabaseUnavailableError(`${what} did not answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What the pool last saw of the database: a query answered (up) or a fault
 * (down). Reads that can answer from memory (verified tokens, the node and
 * status lists) do so at once while it is known down (a fault, no answer
 * since), never paying the full deadline again; once `windowMs` has passed
 * since the last fault, one of them asks the database again in the
 * background (probeDue), and any answer marks it up.
 */
export class DbHealth {
  private downAt: number | null = null;
  /** Statements sent on the pool (a test or bench proves idle work costs none by counting them). */
  statements = 0;
  /** Statements that read or write `deployments` (idle deployment watchers must cost none). */
  deploymentStatements = 0;

  constructor(private readonly windowMs = 1_000) {}

  up(): void {
    this.downAt = null;
  }

  sent(text: unknown): void {
    this.statements++;
    if (typeof text === 'string' && text.includes('"deployments"')) this.deploymentStatements++;
  }

  down(): void {
    this.downAt = Date.now();
  }

  /** A fault and no answer since, however long ago: memory reads answer from memory, without waiting on the database. */
  get knownDown(): boolean {
    return this.downAt !== null;
  }

  /** Known down, and the last fault is older than the window: time for one background read to ask again. */
  get probeDue(): boolean {
    return this.downAt !== null && !this.recentlyDown;
  }

  /** A fault within the window and no answer since. */
  get recentlyDown(): boolean {
    return this.downAt !== null && Date.now() - this.downAt < this.windowMs;
  }
}
