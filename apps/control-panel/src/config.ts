import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { ConfigError, parseEnv, parseHostPort } from '@tether/common';
import { pinnedProtocolRange } from '@tether/protocol';
import { EnvSchema } from './config-env.js';
import { parseDatabaseHosts } from './db/database-hosts.js';

// The one place the panel reads process.env (through main.ts). The variables,
// their bounds and defaults are config-env.ts's schema; here they become the
// panel's settings, grouped by the part that uses them. The type is what
// loadConfig returns: nothing restated. Invalid values stop the panel at start
// with a message naming each bad variable.

export { ENV_VARS } from './config-env.js';

/** What the panel runs with (inferred from loadConfig below). */
export type PanelConfig = ReturnType<typeof loadConfig>;

export { ConfigError };

const WILDCARDS = new Set(['0.0.0.0', '::', '[::]']);

/** "host:port" (an IPv6 host in brackets); the port may be 0 (any free one). */
function parseListen(value: string): { host: string; port: number } {
  const listen = parseHostPort(value);
  if (!listen) throw new ConfigError([`TETHER_INTERNAL_LISTEN=${JSON.stringify(value)}: expected host:port (an IPv6 host in brackets), port 0-65535`]);
  return listen;
}

/** Reads and validates configuration from an environment (process.env in main.ts, a literal in tests). */
export function loadConfig(env: Record<string, string | undefined>) {
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
    /** Where the secrets keys come from (secrets/keyring.ts reads them). */
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
      /** Where /internal/v1 is served instead of the public listener (TETHER_INTERNAL_LISTEN); undefined: the public one. */
      internalListen,
    },
    /** How often API tokens' last-used times are written (in batches). */
    tokenLastUsedFlushMs: e.TETHER_TOKEN_LAST_USED_FLUSH_MS,
    /** How long a verified token is honoured from memory while the database cannot answer (0: never). */
    tokenCacheMs: e.TETHER_TOKEN_CACHE_MS,
    db: {
      connectTimeoutMs: e.TETHER_DB_CONNECT_TIMEOUT_MS,
      queryTimeoutMs: e.TETHER_DB_QUERY_TIMEOUT_MS,
      poolSize: e.TETHER_DB_POOL_SIZE,
      /** /readyz's own deadline. */
      readyTimeoutMs: e.TETHER_READY_TIMEOUT_MS,
    },
    outbox: {
      /** Longest wait between two attempts to write session facts while the database refuses them. */
      retryMaxMs: e.TETHER_OUTBOX_RETRY_MAX_MS,
      /** Pending facts held in memory before droppable ones (last-seen, token last-used) are dropped. */
      maxPending: e.TETHER_OUTBOX_MAX_PENDING,
    },
    sessions: {
      idleTimeoutMs: e.TETHER_SESSION_IDLE_MS,
      pingIntervalMs: e.TETHER_PING_INTERVAL_MS,
      heartbeatIntervalMs: e.TETHER_HEARTBEAT_INTERVAL_MS,
      agentIdleTimeoutMs: e.TETHER_AGENT_IDLE_MS,
      ackTimeoutMs: e.TETHER_ACK_TIMEOUT_MS,
      helloTimeoutMs: e.TETHER_HELLO_TIMEOUT_MS,
      lastSeenFlushMs: e.TETHER_LAST_SEEN_FLUSH_MS,
      sendBufferLimitBytes: e.TETHER_SEND_BUFFER_LIMIT_BYTES,
      /** How long a verified node token is honoured without asking the database (0: ask every time). */
      nodeTokenCacheMs: e.TETHER_NODE_TOKEN_CACHE_MS,
      /** The `hello` versions accepted. */
      protocolVersions: pinnedProtocolRange(e.TETHER_PROTOCOL_VERSION_MAX),
      /** Sizes the retry window a planned stop hints to the agents (docs/protocol.md, "Retry hint"). */
      restartOpensPerSec: e.TETHER_RESTART_OPENS_PER_SEC,
      /** Upgrades opening at once past which new ones are refused with 503 + Retry-After. */
      maxOpening: e.TETHER_MAX_OPENING_SESSIONS,
    },
    routing: {
      reconcileIntervalMs: e.TETHER_RECONCILE_INTERVAL_MS,
      debounceMs: e.TETHER_ROUTING_DEBOUNCE_MS,
    },
    panel: {
      /** Generated per process when TETHER_PANEL_ID is unset. */
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
    scheduler: {
      allocations: e.TETHER_ALLOCATIONS === 'on',
      intervalMs: e.TETHER_SCHEDULER_INTERVAL_MS,
      leaseMs: e.TETHER_SCHEDULER_LEASE_MS,
      progressDeadlineMs: e.TETHER_PROGRESS_DEADLINE_SECONDS * 1000,
      failover: {
        rescheduleAfterMs: e.TETHER_RESCHEDULE_AFTER_MS,
        maxUnreachableFraction: e.TETHER_RESCHEDULE_MAX_UNREACHABLE / 100,
        perMinute: e.TETHER_RESCHEDULE_PER_MINUTE,
      },
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
