/**
 * The newest version of the wire protocol (N), the one `hello` names by default.
 * Still 1: everything added since the first release is optional or announced by
 * `capabilities`, and a first-release end accepts it (docs/protocol.md, "Versions").
 * Bump it only for a change a peer of the previous version would reject.
 */
export const PROTOCOL_VERSION = 1;

/**
 * The oldest version a panel accepts and an agent falls back to (N-1 once N
 * is 2). Raising it is the contract step that drops the previous version.
 */
export const MIN_PROTOCOL_VERSION = 1;

/** Largest frame either end accepts, in bytes. Larger frames are rejected before parsing. */
export const MAX_FRAME_BYTES = 1024 * 1024;

/**
 * Exception for the two panel → agent messages that carry a whole host's state:
 * `routing.map` and `workloads`. A host with 10,000 routes has a map of about
 * 1.3 MB, so the agent accepts frames from the panel up to this size. Frames
 * from agents stay under MAX_FRAME_BYTES.
 */
export const MAX_STATE_FRAME_BYTES = 16 * 1024 * 1024;

/**
 * The panel's WebSocket payload limit. A frame between MAX_FRAME_BYTES and
 * this gets a FRAME_TOO_LARGE `error`; a larger one is not even read: the
 * WebSocket layer closes the connection with MESSAGE_TOO_BIG (1009). The
 * agent's limit is MAX_STATE_FRAME_BYTES.
 */
export const MAX_PAYLOAD_BYTES = 2 * MAX_FRAME_BYTES;

/**
 * Frames in a row that fail to decode (before or after `hello`) after which
 * the panel closes the session with PROTOCOL_ERROR. Each one gets an `error`
 * reply first; a valid frame resets the count.
 */
export const MAX_INVALID_STREAK = 5;

/**
 * `error` replies the panel sends one session per second at most (a bucket of
 * this many, refilled at this rate). A rejected frame beyond it is counted but
 * not answered: a flood of bad frames cannot make the panel write as fast as
 * the peer sends.
 */
export const MAX_ERROR_REPLIES_PER_SECOND = 10;

/**
 * Bytes of rejected frames the panel reads from one session per second (a
 * bucket of this many, each rejected frame counting at least 1 KiB). Past it,
 * the panel stops reading that session until the bucket refills (TCP pushes
 * back on the sender), so one hostile peer cannot take the loop from others.
 */
export const MAX_INVALID_BYTES_PER_SECOND = 1024 * 1024;

/**
 * Panel → agent messages the agent ACKs at once, before the work. No ACK
 * within `ackTimeoutMs` kills the session with ACK_TIMEOUT, whichever it was.
 */
export const ACKED_MESSAGE_TYPES = Object.freeze(['deploy', 'workloads', 'allocations', 'routing.map', 'volumes.remove', 'certificates'] as const);

/**
 * Optional protocol features, announced by the agent in `hello.capabilities`
 * and confirmed by the panel in `welcome.capabilities`. An end uses one only
 * when both named it, so a panel and an agent of different releases still
 * talk; an unknown name is ignored.
 */
export const CAPABILITIES = Object.freeze({
  /** Reload and canary-drop events in their own `proxy.events` message, ACKed once stored. */
  PROXY_EVENTS: 'proxy.events',
  /** Container logs over the session: `logs.open`/`logs.credit`/`logs.close` (panel → agent), `logs.chunk`/`logs.end` (agent → panel). */
  LOGS: 'logs',
  /** Workload fields `command` and `args` (replace the image's ENTRYPOINT and CMD). */
  WORKLOAD_COMMAND: 'workload.command',
  /** Workload field `resources` (CPU and memory limits); containers report `oomKilled`. */
  WORKLOAD_RESOURCES: 'workload.resources',
  /** Workload field `volumes` (named volumes the service owns; a writable one rolls out without overlap). */
  WORKLOAD_VOLUMES: 'workload.volumes',
  /** The node's named volumes in `volumes.report` (agent → panel); `volumes.remove` may name single volumes. */
  VOLUMES_INVENTORY: 'volumes.inventory',
  /**
   * Workload field `healthCheck` (an HTTP check the agent runs from outside the container before a rollout
   * switches and while it runs); containers of such a workload carry `lastProbe` in heartbeats.
   */
  WORKLOAD_HEALTH_CHECK: 'workload.healthCheck',
  /**
   * Workload field `drainSeconds`: after a rollout switches, the old containers leave the answers and keep their
   * open connections until those close or the drain's deadline falls; the agent then reports the drain in
   * `deploy.drained` (agent → panel).
   */
  WORKLOAD_DRAIN: 'workload.drain',
  /** `workload.secrets` in `deploy`/`workloads`: values the agent adds to the container's environment. */
  SECRETS: 'secrets',
  /**
   * `workload.registryAuth` in `deploy`/`workloads`: credentials of the image's registry, used to pull it and to
   * check a private image already on the node before it runs for this workload (docs/protocol.md, "Registry credentials").
   */
  REGISTRY_AUTH: 'registry.auth',
  /**
   * The agent's proxy runs a config made from settings only (the static proxy, every agent's): routing maps
   * change answers, never the config. A panel that names it back understands the reload kind `static-move`
   * (the one load that moves a node from the per-route config to the static one); to any other panel the
   * agent reports that load as `change`.
   */
  PROXY_STATIC: 'proxy.static',
  /**
   * The agent probes every customer route through its own proxy and carries the last probe of each in
   * `routing.probes` (heartbeats, hello, routing.applied), with the interval in `routing.probeIntervalMs`.
   */
  ROUTES_PROBE: 'routes.probe',
  /**
   * The node's intent as allocations: `allocations` (panel → agent) replaces `deploy` and `workloads`, the agent
   * runs one container per allocation and reports each in `allocations.status` (agent → panel) and, on its
   * containers, `allocationId`.
   */
  WORKLOAD_ALLOCATIONS: 'workload.allocations',
  /**
   * Cross-node routing (issue 37; needs `workload.allocations` and `proxy.static`): the agent publishes the port
   * of each allocation whose release has one on its private address (`hello.privateAddress`) only, reports it as
   * `endpoint` in `allocations.status`, and reads `remote` on routing map routes: the endpoints of the service's
   * replicas on other nodes. Its answers hold its local serving replicas while it has one and the remote endpoints
   * that pass its own TCP probe otherwise. Without it a node's map holds its local replicas only.
   */
  ROUTING_REMOTE: 'routing.remote',
  /**
   * One certificate issuer per domain (needs `routing.remote`): routing map routes of a node that is not the
   * domain's issuer carry `certificate: { issuer, challengeVia }`; such an agent never asks the CA for that domain,
   * serves the certificate the panel sends in `certificates` and forwards the CA's HTTP-01 challenges to
   * `challengeVia`. The issuer reports what its proxy obtained in `certificates.report` (ACKed once stored).
   */
  CERTIFICATES_SHARE: 'certificates.share',
  /**
   * Self-fencing (issue 38; needs `workload.allocations`): releases may carry `fence: true`; the agent stops such
   * containers once `hello.fence.afterMs` has passed since the last frame it received from a panel, and starts them
   * again only from an `allocations` (or `workloads`) set that a session opened after the fence brings. Rollouts of
   * a fenced release never overlap (the old container stops before the new one starts).
   */
  WORKLOAD_FENCE: 'workload.fence',
  /**
   * Rollouts without overlap on request (issue 36: a service's rollout.maxSurge 0): a release of an `allocations`
   * set may carry `stopFirst: true`; the agent then stops the old container before it starts the new one, as for a
   * writable volume or a fenced release.
   */
  WORKLOAD_STOP_FIRST: 'workload.stop-first',
  /**
   * Drains of allocation rollouts reported (needs `workload.allocations` and `workload.drain`): after each rollout of
   * an `allocations` set on the node (the allocations of one service moved to one release) the agent sends
   * `allocations.drained` once the replaced containers' drain ended, so a deployment managed by allocations reports
   * its drain as a deployment sent as `deploy` does.
   */
  ALLOCATIONS_DRAIN: 'allocations.drain',
} as const);
export type Capability = (typeof CAPABILITIES)[keyof typeof CAPABILITIES];

/**
 * Log streams over the session (capability `logs`). Credit is counted in
 * bytes of encoded `logs.chunk` frames: the agent sends a chunk only when its
 * frame fits in what the panel granted and has not used yet.
 */
export const LOG_LIMITS = Object.freeze({
  /** The largest `logs.chunk` frame, in bytes (UTF-8 of the encoded frame). */
  maxChunkBytes: 64 * 1024,
  /** The most credit a stream may have granted and unused at once. */
  maxCreditBytes: 4 * 1024 * 1024,
  /** The most lines a `tail` asks for. */
  maxTail: 10_000,
  /** The most lines in one chunk. */
  maxChunkLines: 2_000,
});

/**
 * Timing defaults, each configurable on the panel; the panel hands the values the
 * agent must use to it in `welcome`.
 */
export const TIMING_DEFAULTS = Object.freeze({
  /** Agent → panel heartbeat cadence. */
  heartbeatIntervalMs: 5_000,
  /** Panel → agent ping cadence. */
  pingIntervalMs: 30_000,
  /** Panel read-idle deadline: silence past it means the session is half-open. */
  panelIdleTimeoutMs: 30_000,
  /** Agent read-idle deadline: three missed panel pings. */
  agentIdleTimeoutMs: 90_000,
  /** How long the panel waits for the `ack` of a `deploy`, `workloads` or `routing.map`. */
  ackTimeoutMs: 10_000,
  /** Full routing map push to every live session. */
  routingPushIntervalMs: 300_000,
  /** How long the agent may take to send `hello` after the upgrade. */
  helloTimeoutMs: 5_000,
});

export type Timing = {
  heartbeatIntervalMs: number;
  pingIntervalMs: number;
  panelIdleTimeoutMs: number;
  agentIdleTimeoutMs: number;
  ackTimeoutMs: number;
};

/** The timing a `welcome` carries when the panel runs with its defaults. */
export const DEFAULT_TIMING: Readonly<Timing> = Object.freeze({
  heartbeatIntervalMs: TIMING_DEFAULTS.heartbeatIntervalMs,
  pingIntervalMs: TIMING_DEFAULTS.pingIntervalMs,
  panelIdleTimeoutMs: TIMING_DEFAULTS.panelIdleTimeoutMs,
  agentIdleTimeoutMs: TIMING_DEFAULTS.agentIdleTimeoutMs,
  ackTimeoutMs: TIMING_DEFAULTS.ackTimeoutMs,
});

/**
 * WebSocket close codes of the protocol (the 4000-4999 range is reserved for
 * applications by RFC 6455). Documented in docs/protocol.md.
 */
export const CLOSE_CODES = Object.freeze({
  /** No frame arrived within the read-idle deadline. */
  IDLE_TIMEOUT: 4000,
  /** A `deploy`, `workloads` or `routing.map` was not ACKed within the ACK timeout. */
  ACK_TIMEOUT: 4001,
  /** A newer session of the same node replaced this one. */
  SUPERSEDED: 4002,
  /** The node token is no longer valid. */
  UNAUTHORIZED: 4003,
  /** The peer broke the protocol (first frame not `hello`, repeated invalid frames). */
  PROTOCOL_ERROR: 4004,
  /** The node was decommissioned by an operator; the agent must not reconnect with this token. */
  DECOMMISSIONED: 4005,
  /** No `hello` within the hello timeout after the upgrade. */
  HELLO_TIMEOUT: 4006,
  /** The peer stopped reading: its send buffer passed the bound. */
  SLOW_CONSUMER: 4007,
  /** `hello` named a protocol version this panel does not accept (too old or too new); an `error` with the same code comes first. */
  UNSUPPORTED_PROTOCOL_VERSION: 4008,
  /** The panel is shutting down; reconnect with backoff. */
  GOING_AWAY: 1001,
  /**
   * RFC 6455 "service restart": a planned panel stop. The reason carries a retry hint
   * (`retry-window-ms=<n>`, see retry-hint.ts): reconnect spread within that window, not with doubling backoff.
   */
  SERVICE_RESTART: 1012,
  /** Sent by the WebSocket layer (RFC 6455): a text frame that is not valid UTF-8. */
  INVALID_PAYLOAD: 1007,
  /** Sent by the WebSocket layer (RFC 6455): a frame over the receiver's payload limit (see MAX_PAYLOAD_BYTES). */
  MESSAGE_TOO_BIG: 1009,
} as const);

export type CloseCodeName = keyof typeof CLOSE_CODES;
export type CloseCode = (typeof CLOSE_CODES)[CloseCodeName];

/**
 * The `error.code` of the panel's 403 answer to the upgrade of a decommissioned (or lost) node. An agent refused with
 * it, or closed with DECOMMISSIONED, stops every container it runs for Tether and starts none again until a panel
 * welcomes it (docs/protocol.md, "Decommissioned").
 */
export const DECOMMISSIONED_REFUSAL_CODE = 'AGENT_DECOMMISSIONED';

/** Close codes after which an agent must stop reconnecting (an operator has to act). */
export const TERMINAL_CLOSE_CODES: ReadonlySet<number> = new Set([
  CLOSE_CODES.UNAUTHORIZED,
  CLOSE_CODES.DECOMMISSIONED,
]);

export function closeCodeName(code: number): CloseCodeName | undefined {
  for (const [name, value] of Object.entries(CLOSE_CODES)) {
    if (value === code) return name as CloseCodeName;
  }
  return undefined;
}
