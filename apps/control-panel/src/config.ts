import { randomBytes } from 'node:crypto';
import path from 'node:path';
import Type from 'typebox';
import { LogFormatSchema, type LogFormat } from '@tether/common/logging';
import { ConfigError, parseEnv } from '@tether/common';
import { parseDatabaseHosts } from './db/database-hosts.js';
import { MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, TIMING_DEFAULTS, pinnedProtocolRange, type ProtocolRange } from '@tether/protocol';

// The one place the panel reads process.env. Every variable is listed, with its
// default, in docs/operations.md. Invalid values stop the panel at start with
// a message naming each bad variable.

const Ms = (def: number, min = 10) => Type.Integer({ minimum: min, maximum: 86_400_000, default: def });

const EnvSchema = Type.Object({
  TETHER_HOST: Type.String({ minLength: 1, default: '127.0.0.1' }),
  TETHER_PORT: Type.Integer({ minimum: 0, maximum: 65_535, default: 8080 }),
  /** Accept queue: a fleet reconnecting at once must queue, not be reset. Capped by net.core.somaxconn. */
  TETHER_LISTEN_BACKLOG: Type.Integer({ minimum: 1, maximum: 65_535, default: 65_535 }),
  /** Public URL printed at start and given to local agents; defaults to http://HOST:PORT. */
  TETHER_PUBLIC_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  TETHER_DATA_DIR: Type.String({ minLength: 1, default: '.tether' }),
  TETHER_EMBEDDED_PG_PORT: Type.Integer({ minimum: 0, maximum: 65_535, default: 0 }),
  TETHER_ADMIN_TOKEN: Type.Optional(Type.String({ minLength: 16, maxLength: 256 })),
  /** Secrets keys, comma-separated, the first encrypts (32 bytes as base64 or hex each); or a file of them. */
  TETHER_SECRETS_KEY: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
  TETHER_SECRETS_KEY_FILE: Type.Optional(Type.String({ minLength: 1 })),
  /** Proxies (addresses or CIDRs, comma-separated) whose X-Forwarded-For names the client: the audit's source address. */
  TETHER_TRUSTED_PROXIES: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
  /** Audit rows older than this are deleted (checked hourly); 0 keeps them for ever. */
  TETHER_AUDIT_RETENTION_DAYS: Type.Integer({ minimum: 0, maximum: 36_500, default: 365 }),
  TETHER_LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
  /** auto: readable lines on a terminal, JSON lines otherwise (docs/operations.md, "Logs"). */
  TETHER_LOG_FORMAT: LogFormatSchema,
  TETHER_SESSION_IDLE_MS: Ms(TIMING_DEFAULTS.panelIdleTimeoutMs),
  TETHER_PING_INTERVAL_MS: Ms(TIMING_DEFAULTS.pingIntervalMs),
  TETHER_HEARTBEAT_INTERVAL_MS: Ms(TIMING_DEFAULTS.heartbeatIntervalMs),
  TETHER_AGENT_IDLE_MS: Ms(TIMING_DEFAULTS.agentIdleTimeoutMs),
  TETHER_ACK_TIMEOUT_MS: Ms(TIMING_DEFAULTS.ackTimeoutMs),
  TETHER_HELLO_TIMEOUT_MS: Ms(TIMING_DEFAULTS.helloTimeoutMs),
  TETHER_RECONCILE_INTERVAL_MS: Ms(TIMING_DEFAULTS.routingPushIntervalMs),
  TETHER_ROUTING_DEBOUNCE_MS: Ms(250, 0),
  TETHER_LAST_SEEN_FLUSH_MS: Ms(10_000),
  /** Opens a second the fleet is spread to when it comes back after a planned stop (the retry hint's window). */
  TETHER_RESTART_OPENS_PER_SEC: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1_500 }),
  /** Agent upgrades opening at once (upgrade → welcome) past which new ones get 503 + Retry-After. */
  TETHER_MAX_OPENING_SESSIONS: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 500 }),
  /** Connections one source address may hold before authentication (agent sessions stop counting once welcomed). */
  TETHER_MAX_CONNECTIONS_PER_ADDRESS: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1_000 }),
  /** A request (headers and body) not received within this is answered 408 REQUEST_TIMEOUT and closed. */
  TETHER_BODY_TIMEOUT_MS: Ms(30_000, 100),
  /** The window of the request rate limits below. */
  TETHER_RATE_LIMIT_WINDOW_MS: Ms(60_000, 1_000),
  /** Requests per window with one bearer token this panel verified lately. */
  TETHER_RATE_LIMIT_PER_TOKEN: Type.Integer({ minimum: 1, maximum: 100_000_000, default: 6_000 }),
  /** Requests per window from one address without such a token (none, unknown, wrong, the fleet page's cookie). */
  TETHER_RATE_LIMIT_UNAUTHENTICATED: Type.Integer({ minimum: 1, maximum: 100_000_000, default: 600 }),
  /** Fleet-page sign-ins per window from one address. */
  TETHER_SIGN_IN_RATE_LIMIT: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 20 }),
  TETHER_TOKEN_LAST_USED_FLUSH_MS: Ms(10_000),
  /** `?wait=` waits and deployment event streams one token may hold at once (429 STREAMS_EXHAUSTED past it). */
  TETHER_STREAMS_PER_TOKEN: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 100 }),
  /** The same, over all of one team's tokens. */
  TETHER_STREAMS_PER_TEAM: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 500 }),
  /** The shared re-read of watched deployments (?wait=, /events) while their NOTIFY signals cannot be heard. */
  TETHER_DEPLOYMENT_WATCH_MS: Ms(250),
  /** The same while signals are heard: one query for every watched deployment, for a signal that was missed. */
  TETHER_DEPLOYMENT_SWEEP_MS: Ms(10_000, 100),
  /** How long past a deployment's drainSeconds its event stream waits for the agent's drain report. */
  TETHER_DRAIN_REPORT_GRACE_MS: Ms(660_000, 0),
  /** Log streams (GET /v1/services/:id/logs) open at once per node. */
  TETHER_LOG_STREAMS_PER_NODE: Type.Integer({ minimum: 1, maximum: 10_000, default: 8 }),
  /** A log follow that carries no line for this long ends (LOG_FOLLOW_IDLE); keep-alive notices until then. */
  TETHER_LOG_FOLLOW_IDLE_MS: Ms(3_600_000, 1_000),
  /** Bytes per second one log stream may carry. */
  TETHER_LOG_STREAM_BYTES_PER_SEC: Type.Integer({ minimum: 1024, maximum: 1024 * 1024 * 1024, default: 1024 * 1024 }),
  /** Per stream: credit the agent may hold plus bytes the HTTP client has not taken yet. */
  TETHER_LOG_WINDOW_BYTES: Type.Integer({ minimum: 65_536, maximum: 4 * 1024 * 1024, default: 256 * 1024 }),
  /** The newest protocol version agents may speak; lower during a rolling upgrade (docs/protocol.md, "Versions"). */
  TETHER_PROTOCOL_VERSION_MAX: Type.Integer({ minimum: MIN_PROTOCOL_VERSION, maximum: PROTOCOL_VERSION, default: PROTOCOL_VERSION }),
  TETHER_SEND_BUFFER_LIMIT_BYTES: Type.Integer({ minimum: 1024, default: 8 * 1024 * 1024 }),
  // Database bounds: a frozen server enforces nothing, so the client does (docs/operations.md, "Database outages").
  TETHER_DB_CONNECT_TIMEOUT_MS: Ms(5_000),
  TETHER_DB_QUERY_TIMEOUT_MS: Ms(5_000),
  TETHER_DB_POOL_SIZE: Type.Integer({ minimum: 1, maximum: 1_000, default: 10 }),
  TETHER_READY_TIMEOUT_MS: Ms(1_000),
  TETHER_TOKEN_CACHE_MS: Ms(300_000, 0),
  TETHER_NODE_TOKEN_CACHE_MS: Ms(300_000, 0),
  TETHER_OUTBOX_RETRY_MAX_MS: Ms(2_000),
  TETHER_OUTBOX_MAX_PENDING: Type.Integer({ minimum: 100, maximum: 10_000_000, default: 100_000 }),
  /** How often the fleet page and per-node metrics re-read nodes, services and ACK-timeout events. */
  TETHER_FLEET_REFRESH_MS: Ms(5_000, 100),
  /** Key of the fleet page's signed cookies; panels sharing a database must share it (random per process when unset). */
  TETHER_DASHBOARD_SECRET: Type.Optional(Type.String({ minLength: 32, maxLength: 512 })),
  TETHER_DASHBOARD_COOKIE_TTL_MS: Ms(12 * 3_600_000, 60_000),
  /** A fleet-page stream with more than this unsent is dropped (the browser reconnects and gets a fresh snapshot). */
  TETHER_DASHBOARD_STREAM_BUFFER_BYTES: Type.Integer({ minimum: 65_536, default: 32 * 1024 * 1024 }),
  /** Fleet-page reads of the database (node history, sign-in of a token not yet cached) give up after this. */
  TETHER_DASHBOARD_DB_DEADLINE_MS: Ms(5_000, 100),
  /** This panel's id among the panels sharing the database (generated per process when unset). */
  TETHER_PANEL_ID: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9._-]{1,64}$' })),
  /** A separate listener (host:port) for the internal surface /internal/v1; the public one then answers 404 for it. */
  TETHER_INTERNAL_LISTEN: Type.Optional(Type.String({ minLength: 3, maxLength: 300 })),
  /** Where other panels reach this one (defaults to the internal listener's address, else the public URL). */
  TETHER_PANEL_INTERNAL_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  /** The panel's lease on its sessions, renewed at a third of it. */
  TETHER_PANEL_LEASE_MS: Ms(10_000, 300),
  /**
   * Bound on asking another panel over its internal URL (connect + answer). At most 1.5 s: an owner's answer
   * counts from when it was asked, so it must come well within the 2 s frame ages may differ by.
   */
  TETHER_PANEL_PEER_TIMEOUT_MS: Type.Integer({ minimum: 50, maximum: 1_500, default: 1_000 }),
});

/** Every variable this app reads (docs/operations.md lists each; a test checks). */
export const ENV_VARS: readonly string[] = Object.keys(EnvSchema.properties);


export interface PanelConfig {
  host: string;
  port: number;
  listenBacklog: number;
  publicUrl: string | undefined;
  databaseUrl: string | undefined;
  dataDir: string;
  embeddedPgPort: number;
  adminToken: string | undefined;
  /** Where the secrets keys come from (secrets/keyring.ts reads them). */
  secretsKeys: { keys: string | undefined; keyFile: string | undefined };
  audit: { trustedProxies: string[]; retentionDays: number };
  logLevel: string;
  logFormat: LogFormat;
  http: {
    maxConnectionsPerAddress: number;
    bodyTimeoutMs: number;
    rateLimits: { windowMs: number; perToken: number; unauthenticated: number; signIn: number };
    /** Where /internal/v1 is served instead of the public listener (TETHER_INTERNAL_LISTEN); undefined: the public one. */
    internalListen: { host: string; port: number } | undefined;
  };
  /** How often API tokens' last-used times are written (in batches). */
  tokenLastUsedFlushMs: number;
  /** How long a verified token is honoured from memory while the database cannot answer (0: never). */
  tokenCacheMs: number;
  db: {
    connectTimeoutMs: number;
    queryTimeoutMs: number;
    poolSize: number;
    /** /readyz's own deadline. */
    readyTimeoutMs: number;
  };
  outbox: {
    /** Longest wait between two attempts to write session facts while the database refuses them. */
    retryMaxMs: number;
    /** Pending facts held in memory before droppable ones (last-seen, token last-used) are dropped. */
    maxPending: number;
  };
  sessions: {
    idleTimeoutMs: number;
    pingIntervalMs: number;
    heartbeatIntervalMs: number;
    agentIdleTimeoutMs: number;
    ackTimeoutMs: number;
    helloTimeoutMs: number;
    lastSeenFlushMs: number;
    sendBufferLimitBytes: number;
    /** How long a verified node token is honoured without asking the database (0: ask every time). */
    nodeTokenCacheMs: number;
    /** The `hello` versions accepted. */
    protocolVersions: ProtocolRange;
    /** Sizes the retry window a planned stop hints to the agents (docs/protocol.md, "Retry hint"). */
    restartOpensPerSec: number;
    /** Upgrades opening at once past which new ones are refused with 503 + Retry-After. */
    maxOpening: number;
  };
  routing: {
    reconcileIntervalMs: number;
    debounceMs: number;
  };
  panel: {
    /** Generated per process when TETHER_PANEL_ID is unset. */
    id: string;
    internalUrl: string | undefined;
    leaseMs: number;
    peerTimeoutMs: number;
  };
  deployments: {
    watchPollMs: number;
    sweepMs: number;
    drainReportGraceMs: number;
  };
  streams: {
    perToken: number;
    perTeam: number;
  };
  logs: {
    streamsPerNode: number;
    followIdleMs: number;
    bytesPerSecond: number;
    windowBytes: number;
  };
  dashboard: {
    fleetRefreshMs: number;
    secret: string | undefined;
    cookieTtlMs: number;
    streamBufferBytes: number;
    dbDeadlineMs: number;
  };
}

export { ConfigError };

const WILDCARDS = new Set(['0.0.0.0', '::', '[::]']);

/** "host:port" (an IPv6 host in brackets); the port may be 0 (any free one). */
function parseListen(value: string): { host: string; port: number } {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(value.trim());
  const port = match ? Number(match[2]) : NaN;
  if (!match || port > 65_535) {
    throw new ConfigError([`TETHER_INTERNAL_LISTEN=${JSON.stringify(value)}: expected host:port (an IPv6 host in brackets), port 0-65535`]);
  }
  const host = match[1]!;
  return { host: host.startsWith('[') ? host.slice(1, -1) : host, port };
}

/** Reads and validates configuration from an environment (process.env in main.ts, a literal in tests). */
export function loadConfig(env: Record<string, string | undefined>): PanelConfig {
  const e = parseEnv(EnvSchema, env);
  if (e.DATABASE_URL !== undefined) {
    try {
      parseDatabaseHosts(e.DATABASE_URL);
    } catch (err) {
      throw new ConfigError([`DATABASE_URL: ${(err as Error).message}`]);
    }
  }
  const internalListen = e.TETHER_INTERNAL_LISTEN === undefined ? undefined : parseListen(e.TETHER_INTERNAL_LISTEN);
  if (internalListen && WILDCARDS.has(internalListen.host) && !e.TETHER_PANEL_INTERNAL_URL) {
    throw new ConfigError([
      `TETHER_INTERNAL_LISTEN=${JSON.stringify(e.TETHER_INTERNAL_LISTEN)}: other panels cannot dial a wildcard address; set TETHER_PANEL_INTERNAL_URL to where they reach it`,
    ]);
  }
  return {
    host: e.TETHER_HOST,
    port: e.TETHER_PORT,
    listenBacklog: e.TETHER_LISTEN_BACKLOG,
    publicUrl: e.TETHER_PUBLIC_URL,
    databaseUrl: e.DATABASE_URL,
    dataDir: path.resolve(e.TETHER_DATA_DIR),
    embeddedPgPort: e.TETHER_EMBEDDED_PG_PORT,
    adminToken: e.TETHER_ADMIN_TOKEN,
    secretsKeys: { keys: e.TETHER_SECRETS_KEY, keyFile: e.TETHER_SECRETS_KEY_FILE },
    audit: {
      trustedProxies: (e.TETHER_TRUSTED_PROXIES ?? '').split(',').map((p) => p.trim()).filter((p) => p !== ''),
      retentionDays: e.TETHER_AUDIT_RETENTION_DAYS,
    },
    logLevel: e.TETHER_LOG_LEVEL,
    logFormat: e.TETHER_LOG_FORMAT,
    http: {
      maxConnectionsPerAddress: e.TETHER_MAX_CONNECTIONS_PER_ADDRESS,
      bodyTimeoutMs: e.TETHER_BODY_TIMEOUT_MS,
      rateLimits: {
        windowMs: e.TETHER_RATE_LIMIT_WINDOW_MS,
        perToken: e.TETHER_RATE_LIMIT_PER_TOKEN,
        unauthenticated: e.TETHER_RATE_LIMIT_UNAUTHENTICATED,
        signIn: e.TETHER_SIGN_IN_RATE_LIMIT,
      },
      internalListen,
    },
    tokenLastUsedFlushMs: e.TETHER_TOKEN_LAST_USED_FLUSH_MS,
    tokenCacheMs: e.TETHER_TOKEN_CACHE_MS,
    db: {
      connectTimeoutMs: e.TETHER_DB_CONNECT_TIMEOUT_MS,
      queryTimeoutMs: e.TETHER_DB_QUERY_TIMEOUT_MS,
      poolSize: e.TETHER_DB_POOL_SIZE,
      readyTimeoutMs: e.TETHER_READY_TIMEOUT_MS,
    },
    outbox: { retryMaxMs: e.TETHER_OUTBOX_RETRY_MAX_MS, maxPending: e.TETHER_OUTBOX_MAX_PENDING },
    sessions: {
      idleTimeoutMs: e.TETHER_SESSION_IDLE_MS,
      pingIntervalMs: e.TETHER_PING_INTERVAL_MS,
      heartbeatIntervalMs: e.TETHER_HEARTBEAT_INTERVAL_MS,
      agentIdleTimeoutMs: e.TETHER_AGENT_IDLE_MS,
      ackTimeoutMs: e.TETHER_ACK_TIMEOUT_MS,
      helloTimeoutMs: e.TETHER_HELLO_TIMEOUT_MS,
      lastSeenFlushMs: e.TETHER_LAST_SEEN_FLUSH_MS,
      sendBufferLimitBytes: e.TETHER_SEND_BUFFER_LIMIT_BYTES,
      nodeTokenCacheMs: e.TETHER_NODE_TOKEN_CACHE_MS,
      protocolVersions: pinnedProtocolRange(e.TETHER_PROTOCOL_VERSION_MAX),
      restartOpensPerSec: e.TETHER_RESTART_OPENS_PER_SEC,
      maxOpening: e.TETHER_MAX_OPENING_SESSIONS,
    },
    routing: {
      reconcileIntervalMs: e.TETHER_RECONCILE_INTERVAL_MS,
      debounceMs: e.TETHER_ROUTING_DEBOUNCE_MS,
    },
    panel: {
      id: e.TETHER_PANEL_ID ?? `panel-${randomBytes(6).toString('hex')}`,
      // With a separate internal listener, never the public URL: the listener's address once it listens (server.ts).
      internalUrl: e.TETHER_PANEL_INTERNAL_URL ?? (internalListen ? undefined : e.TETHER_PUBLIC_URL),
      leaseMs: e.TETHER_PANEL_LEASE_MS,
      peerTimeoutMs: e.TETHER_PANEL_PEER_TIMEOUT_MS,
    },
    deployments: {
      watchPollMs: e.TETHER_DEPLOYMENT_WATCH_MS,
      sweepMs: e.TETHER_DEPLOYMENT_SWEEP_MS,
      drainReportGraceMs: e.TETHER_DRAIN_REPORT_GRACE_MS,
    },
    streams: { perToken: e.TETHER_STREAMS_PER_TOKEN, perTeam: e.TETHER_STREAMS_PER_TEAM },
    logs: {
      streamsPerNode: e.TETHER_LOG_STREAMS_PER_NODE,
      followIdleMs: e.TETHER_LOG_FOLLOW_IDLE_MS,
      bytesPerSecond: e.TETHER_LOG_STREAM_BYTES_PER_SEC,
      windowBytes: e.TETHER_LOG_WINDOW_BYTES,
    },
    dashboard: {
      fleetRefreshMs: e.TETHER_FLEET_REFRESH_MS,
      secret: e.TETHER_DASHBOARD_SECRET,
      cookieTtlMs: e.TETHER_DASHBOARD_COOKIE_TTL_MS,
      streamBufferBytes: e.TETHER_DASHBOARD_STREAM_BUFFER_BYTES,
      dbDeadlineMs: e.TETHER_DASHBOARD_DB_DEADLINE_MS,
    },
  };
}
