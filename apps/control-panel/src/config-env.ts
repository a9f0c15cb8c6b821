import Type from 'typebox';
import { LogFormatSchema } from '@tether/common/logging';
import { MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, TIMING_DEFAULTS } from '@tether/protocol';

// Every environment variable the panel reads, with its bounds and default: the
// one schema config.ts validates the environment against. docs/operations.md
// lists each (a test checks).

const Ms = (def: number, min = 10) => Type.Integer({ minimum: min, maximum: 86_400_000, default: def });

export const EnvSchema = Type.Object({
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
  // The scheduler (issue 36): one panel at a time places the replicas of services managed by allocations.
  /**
   * on: confirm workload.allocations to agents that announce it, so services whose node runs such an agent are
   * placed across nodes by the scheduler and rolled out through allocations. off (default, for now): every agent
   * keeps deploy frames and the workloads set (docs/operations.md says what the allocation path does not do yet).
   */
  TETHER_ALLOCATIONS: Type.Union([Type.Literal('on'), Type.Literal('off')], { default: 'on' }),
  /** How often the scheduler's holder evaluates (and at once when something it places from changes). */
  TETHER_SCHEDULER_INTERVAL_MS: Ms(2_000, 50),
  /** The scheduler lease, renewed at a third of it; another panel takes over this long after its holder stops. */
  TETHER_SCHEDULER_LEASE_MS: Ms(10_000, 300),
  /** A rollout across nodes that makes no step for this long fails, naming the nodes it waited for. */
  TETHER_PROGRESS_DEADLINE_SECONDS: Type.Integer({ minimum: 1, maximum: 86_400, default: 600 }),
  // Failover (issue 38): a lost node's stateless replicas are re-placed, on liveness truth, never on a guess.
  /** A node with no live session on any panel for this long (from its teardown, or its owner panel's lease expiry) is lost. */
  TETHER_RESCHEDULE_AFTER_MS: Ms(60_000, 100),
  /** More than this percentage of the nodes unreachable at once: nothing is re-placed (the control plane's own hiccup). */
  TETHER_RESCHEDULE_MAX_UNREACHABLE: Type.Integer({ minimum: 0, maximum: 100, default: 30 }),
  /** At most this many lost replicas re-placed per minute, oldest services first. */
  TETHER_RESCHEDULE_PER_MINUTE: Type.Integer({ minimum: 1, maximum: 100_000, default: 60 }),
});

/** Every variable this app reads (docs/operations.md lists each; a test checks). */
export const ENV_VARS: readonly string[] = Object.keys(EnvSchema.properties);
