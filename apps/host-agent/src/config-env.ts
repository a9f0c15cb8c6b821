import Type, { type Static } from 'typebox';
import { LogFormatSchema } from '@tether/common/logging';
import { MIN_PROTOCOL_VERSION, PROTOCOL_VERSION } from '@tether/protocol';
import { CONTAINER_LOG_DEFAULTS, DEFAULT_RESTART_POLICY, DEFAULT_RUNTIME_TIMING } from './runtime/settings.js';

// Every environment variable the agent reads, with its bounds and default: the one schema config.ts parses
// (docs/operations.md lists each; a test checks). The configuration's type is inferred from what config.ts makes
// of it, so no variable is written a third time.

export const DEFAULT_STATE_DIR = '.tether-agent';
/** TETHER_FENCE_AFTER_MS: two of the panel's default ping intervals (30 s) without a frame. */
export const DEFAULT_FENCE_AFTER_MS = 60_000;

const Ms = (def: number, min = 10) => Type.Integer({ minimum: min, maximum: 86_400_000, default: def });
/** Runtime settings take their defaults from runtime/settings.ts, the one place they are set. */
const T = DEFAULT_RUNTIME_TIMING;
const R = DEFAULT_RESTART_POLICY;

/** `host:port` (a name, an IPv4 address or a bracketed IPv6 address): goes into Caddy's config as a dial address, so nothing else. */
const HOST_PORT = '^([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\]):[0-9]{1,5}$';

export const EnvSchema = Type.Object({
  /** One URL, or several separated by commas (several panels): tried in shuffled order. */
  TETHER_PANEL_URL: Type.String({ pattern: '^(https?|wss?)://', maxLength: 4096 }),
  TETHER_NODE_TOKEN: Type.String({ minLength: 16, maxLength: 256 }),
  TETHER_NODE_NAME: Type.Optional(Type.String({ minLength: 1, maxLength: 253 })),
  TETHER_STATE_DIR: Type.String({ minLength: 1, default: DEFAULT_STATE_DIR }),
  TETHER_LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
  /** auto: readable lines on a terminal, JSON lines otherwise (docs/operations.md, "Logs"). */
  TETHER_LOG_FORMAT: LogFormatSchema,
  /** Overrides of what `welcome` says; unset means "use the panel's". */
  TETHER_AGENT_IDLE_MS: Type.Optional(Type.Integer({ minimum: 10, maximum: 86_400_000 })),
  TETHER_HEARTBEAT_INTERVAL_MS: Type.Optional(Type.Integer({ minimum: 10, maximum: 86_400_000 })),
  TETHER_RECONNECT_MIN_MS: Ms(500),
  TETHER_RECONNECT_MAX_MS: Ms(30_000),
  /** A session that stayed up this long resets the backoff. */
  TETHER_HEALTHY_SESSION_MS: Ms(10_000),
  TETHER_CONNECT_TIMEOUT_MS: Ms(10_000),
  /** The newest protocol version hello says; lower during a rolling upgrade (docs/protocol.md, "Versions"). */
  TETHER_PROTOCOL_VERSION_MAX: Type.Integer({ minimum: MIN_PROTOCOL_VERSION, maximum: PROTOCOL_VERSION, default: PROTOCOL_VERSION }),
  /** Container runtime: docker, or none (no containers; deploys fail with RUNTIME_UNAVAILABLE). */
  TETHER_RUNTIME: Type.Union([Type.Literal('docker'), Type.Literal('none')], { default: 'docker' }),
  DOCKER_HOST: Type.Optional(Type.String({ minLength: 1 })),
  /** Docker network Tether owns; service containers and the proxy container join it. */
  TETHER_DOCKER_NETWORK: Type.String({ minLength: 1, maxLength: 64, default: 'tether' }),
  /** Container reconciliation (src/runtime); each is described in docs/operations.md. */
  TETHER_DOCKER_TIMEOUT_MS: Ms(T.callTimeoutMs, 100),
  TETHER_OBSERVE_TIMEOUT_MS: Ms(T.observeTimeoutMs, 100),
  TETHER_IMAGE_PULL_TIMEOUT_MS: Ms(T.pullTimeoutMs, 1_000),
  TETHER_START_TIMEOUT_MS: Ms(T.startTimeoutMs, 100),
  TETHER_MIN_READY_MS: Type.Integer({ minimum: 0, maximum: 600_000, default: T.minReadyMs }),
  TETHER_DRAIN_MS: Type.Integer({ minimum: 0, maximum: 600_000, default: T.drainMs }),
  TETHER_STOP_TIMEOUT_MS: Type.Integer({ minimum: 0, maximum: 600_000, default: T.stopTimeoutMs }),
  /**
   * Self-fencing (capability workload.fence): containers of fenced services stop once no frame from any panel came
   * for this long. Above the panel's ping interval (30 s), or a quiet healthy session fences.
   */
  TETHER_FENCE_AFTER_MS: Ms(DEFAULT_FENCE_AFTER_MS, 100),
  TETHER_RESTART_BUDGET: Type.Integer({ minimum: 0, maximum: 1_000, default: R.budget }),
  TETHER_RESTART_BACKOFF_MIN_MS: Ms(R.backoffInitialMs),
  TETHER_RESTART_BACKOFF_MAX_MS: Ms(R.backoffMaxMs),
  TETHER_RESTART_RESET_MS: Ms(R.resetAfterMs, 1_000),
  TETHER_RUNTIME_SWEEP_MS: Ms(T.sweepIntervalMs, 100),
  /** Docker json-file log rotation on every container the agent creates (service and proxy containers). */
  TETHER_CONTAINER_LOG_MAX_SIZE: Type.String({ pattern: '^[1-9][0-9]{0,5}[kmg]$', default: CONTAINER_LOG_DEFAULTS.maxSize }),
  TETHER_CONTAINER_LOG_MAX_FILE: Type.Integer({ minimum: 1, maximum: 100, default: CONTAINER_LOG_DEFAULTS.maxFile }),
  /** The node's volumes (volumes.report): listed every scan, each data folder walked at most once per measure interval. */
  TETHER_VOLUME_SCAN_INTERVAL_MS: Ms(15_000, 100),
  TETHER_VOLUME_MEASURE_INTERVAL_MS: Ms(300_000, 1_000),
  /** Log streams (GET /v1/services/:id/logs) this agent serves at once. */
  TETHER_LOG_MAX_STREAMS: Type.Integer({ minimum: 1, maximum: 10_000, default: 64 }),
  /** Proxy: container (agent runs Caddy on Tether's network), external (TETHER_CADDY_ADMIN_URL), or none. */
  TETHER_PROXY: Type.Union([Type.Literal('container'), Type.Literal('external'), Type.Literal('none')], { default: 'none' }),
  TETHER_CADDY_ADMIN_URL: Type.Optional(Type.String({ pattern: '^(https?|unix)://' })),
  TETHER_CADDY_CONFIG_PATH: Type.Optional(Type.String({ minLength: 1 })),
  /** External mode: the admin listen address kept in every config; default: from TETHER_CADDY_ADMIN_URL. */
  TETHER_CADDY_ADMIN_LISTEN: Type.Optional(Type.String({ minLength: 1, maxLength: 300 })),
  TETHER_CADDY_ADMIN_TIMEOUT_MS: Ms(30_000, 100),
  /**
   * External mode, certificates.share: the operator's Caddy's certificate storage folder as the agent sees it (its
   * data folder + `/caddy`, e.g. /var/lib/caddy/.local/share/caddy); unset: certificates are not shared.
   */
  TETHER_CADDY_STORAGE_DIR: Type.Optional(Type.String({ pattern: '^/', maxLength: 4096 })),
  /** Container mode: an image to run instead of building one from TETHER_CADDY_BINARY. */
  TETHER_CADDY_IMAGE: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
  TETHER_CADDY_BINARY: Type.String({ minLength: 1, default: '/usr/bin/caddy' }),
  /** auto: Caddy's automatic HTTPS for every routed domain; off: plain HTTP only. */
  TETHER_PROXY_TLS: Type.Union([Type.Literal('auto'), Type.Literal('off')], { default: 'auto' }),
  TETHER_PROXY_HTTP_PORT: Type.Integer({ minimum: 1, maximum: 65_535, default: 80 }),
  TETHER_PROXY_HTTPS_PORT: Type.Integer({ minimum: 1, maximum: 65_535, default: 443 }),
  /** Container mode: host address the HTTP(S) ports are published on. */
  TETHER_PROXY_BIND_ADDRESS: Type.String({ minLength: 1, maxLength: 64, default: '0.0.0.0' }),
  TETHER_PROXY_ACME_EMAIL: Type.Optional(Type.String({ pattern: '^[^\\s@]+@[^\\s@]+$', maxLength: 254 })),
  /** TLS auto with the ACME issuer: the CA's directory URL (default: Caddy's, Let's Encrypt then ZeroSSL). */
  TETHER_PROXY_ACME_CA: Type.Optional(Type.String({ pattern: '^https://', maxLength: 2048 })),
  /** TLS auto with the ACME issuer: a PEM file with the root that signs that CA's own HTTPS certificate (a private CA), as Caddy reads it. */
  TETHER_PROXY_ACME_CA_ROOT: Type.Optional(Type.String({ pattern: '^/', maxLength: 4096 })),
  /** How often the agent checks that Caddy runs and holds the static config (repairs it); 0 = never. */
  TETHER_PROXY_CHECK_INTERVAL_MS: Type.Integer({ minimum: 0, maximum: 86_400_000, default: 30_000 }),
  /**
   * Gone: static routing is the only routing (docs/architecture.md "Static proxy"). `static` is accepted and changes
   * nothing (an older .env may name it); `config`, the per-route mode that reloaded Caddy on every change, is refused.
   */
  TETHER_PROXY_ROUTING: Type.Optional(Type.Union([Type.Literal('config'), Type.Literal('static')])),
  /** Static routing: where the answerer (knotd) listens, host:port (Caddy's resolver). */
  TETHER_PROXY_ANSWERER_LISTEN: Type.String({ pattern: HOST_PORT, maxLength: 300, default: '127.0.0.1:5399' }),
  /** Static routing in container mode: an existing answerer image to run (default: built locally from TETHER_PROXY_KNOTD and _KNOTC). */
  TETHER_ANSWERER_IMAGE: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
  /** Container mode: a whole answerer tree (knotd, knotc and their shared objects) to build the answerer image from; the agent image sets it. */
  TETHER_ANSWERER_ROOT: Type.Optional(Type.String({ pattern: '^/', maxLength: 4096 })),
  TETHER_PROXY_KNOTD: Type.String({ minLength: 1, maxLength: 4096, default: '/usr/sbin/knotd' }),
  TETHER_PROXY_KNOTC: Type.String({ minLength: 1, maxLength: 4096, default: '/usr/sbin/knotc' }),
  /** Static routing: how often the answerer is probed (and restarted when silent) and the ready containers re-read. */
  TETHER_PROXY_ANSWERER_CHECK_MS: Ms(1_000, 50),
  /** Static routing: bound on one probe of the answerer (a DNS query). */
  TETHER_PROXY_ANSWERER_PROBE_TIMEOUT_MS: Ms(500, 50),
  /** Static routing: how long Caddy keeps a looked-up route before asking again (how soon a change reaches requests). */
  TETHER_PROXY_LOOKUP_REFRESH_MS: Ms(1_000, 100),
  /** Static routing with TLS auto: loopback port of Caddy's own server answering on-demand TLS's ask. */
  TETHER_PROXY_ASK_PORT: Type.Integer({ minimum: 1, maximum: 65_535, default: 9082 }),
  /** TLS auto: acme (a public CA) or internal (Caddy's own CA: tests, private names). */
  TETHER_PROXY_TLS_ISSUER: Type.Union([Type.Literal('acme'), Type.Literal('internal')], { default: 'acme' }),
  /** Route probes: how often each customer route is probed through the agent's own proxy; 0 = off. */
  TETHER_ROUTE_PROBE_INTERVAL_MS: Type.Integer({ minimum: 0, maximum: 3_600_000, default: 30_000 }),
  /** Route probes: how long one probe may wait for the proxy's answer. */
  TETHER_ROUTE_PROBE_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 60_000, default: 5_000 }),
  /** Route probes: at most this many probes a second on this host (one at a time). */
  TETHER_ROUTE_PROBE_RATE: Type.Integer({ minimum: 1, maximum: 1_000, default: 10 }),
  /** IP addresses this host is reached at, comma-separated; default: the non-loopback, non-link-local addresses of its interfaces. */
  TETHER_PUBLIC_ADDRESSES: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
  /** Route probes under the ACME issuer: the DNS server (ip or ip:port, [v6]:port) a name is resolved with before its TLS probe; default: the system's. */
  TETHER_ROUTE_PROBE_DNS_SERVER: Type.Optional(Type.String({ minLength: 1, maxLength: 300 })),
  /** Route probes under the ACME issuer: how long a name's A/AAAA answer is reused. */
  TETHER_ROUTE_PROBE_DNS_CACHE_MS: Type.Integer({ minimum: 0, maximum: 3_600_000, default: 30_000 }),
  /** Static routing with TLS auto: the JSON log Caddy writes its certificate issuance to and the agent follows (default: TETHER_STATE_DIR/caddy-logs/issuance.log). */
  TETHER_PROXY_ISSUANCE_LOG: Type.Optional(Type.String({ pattern: '^/', maxLength: 4096 })),
  /** Canary: how often the HTTP probe goes through the proxy (and the WebSocket is re-opened when down); 0 = canary off. */
  TETHER_CANARY_INTERVAL_MS: Type.Integer({ minimum: 0, maximum: 3_600_000, default: 10_000 }),
  /** Canary: the port of Caddy's dedicated canary server (plain HTTP, never a certificate). */
  TETHER_CANARY_PROXY_PORT: Type.Integer({ minimum: 1, maximum: 65_535, default: 9080 }),
  /** Canary: host:port the agent's canary endpoint listens on. */
  TETHER_CANARY_LISTEN: Type.String({ pattern: HOST_PORT, maxLength: 300, default: '127.0.0.1:9081' }),
  /** Canary: host:port Caddy dials to reach that endpoint; default: TETHER_CANARY_LISTEN (container mode: set it, see docs). */
  TETHER_CANARY_UPSTREAM: Type.Optional(Type.String({ pattern: HOST_PORT, maxLength: 300 })),
  /** Canary: http://host:port where the agent reaches Caddy's canary server; default: 127.0.0.1 (external) or the proxy container's address on Tether's network (container), at TETHER_CANARY_PROXY_PORT. */
  TETHER_CANARY_PROXY_URL: Type.Optional(Type.String({ pattern: '^http://' })),
  /** Cross-node routing (routing.remote): this node's IP on the operators' private network; allocation ports are published there only. */
  TETHER_PRIVATE_ADDRESS: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  /** Cross-node routing: how often every remote endpoint of the applied map is TCP-probed, and how long one connect may take. */
  TETHER_REMOTE_PROBE_INTERVAL_MS: Ms(1_000, 50),
  TETHER_REMOTE_PROBE_TIMEOUT_MS: Ms(500, 10),
  /** Prometheus metrics and /healthz over HTTP: off when unset (0 = a free port, logged). */
  TETHER_AGENT_METRICS_PORT: Type.Optional(Type.Integer({ minimum: 0, maximum: 65_535 })),
  TETHER_AGENT_METRICS_HOST: Type.String({ minLength: 1, maxLength: 253, default: '127.0.0.1' }),
});

/** Every variable this app reads (docs/operations.md lists each; a test checks). */
export const ENV_VARS: readonly string[] = Object.keys(EnvSchema.properties);

export type Env = Static<typeof EnvSchema>;
