import Type, { type Static } from 'typebox';
import { Identifier, Nullable } from '@tether/common';

/**
 * Bounds of every string field, in characters (UTF-16 code units). They keep
 * a hostile peer from making either end allocate without limit; the frame
 * size limit is the outer bound. Listed in docs/protocol.md.
 *
 * Identifiers and names are refused at decode (INVALID_FIELD) when empty, over
 * their bound, or holding a control character or an unpaired surrogate: they
 * end up in database keys, log fields and the proxy config. Free text (`text`:
 * reasons, error messages, container output) is accepted as it comes, and the
 * sender sanitises it first (control characters escaped, NUL never sent).
 */
export const FIELD_LIMITS = Object.freeze({
  /** Message ids and refs; session, node, service, deployment and container ids. */
  id: 128,
  /** Node names, container and service names, domains. */
  name: 253,
  /** Error codes in `deploy.result` and `error`. */
  code: 64,
  /** Routing hashes. */
  hash: 128,
  /** ISO 8601 timestamps. */
  timestamp: 64,
  agentVersion: 64,
  /** Image references. */
  image: 512,
  /** Environment variable names. */
  envName: 256,
  /** Route path prefixes. */
  pathPrefix: 1024,
  /** Route upstreams (`svc-<serviceId>:<port>`). */
  upstream: 300,
  /** Free text: reasons, error messages, container output. */
  text: 4096,
  /** Environment variable values (free text, passed to the container as they are). */
  envValue: 32_768,
});

// Shared building blocks.
const Id = Identifier(FIELD_LIMITS.id);
const Name = Identifier(FIELD_LIMITS.name);
const Code = Identifier(FIELD_LIMITS.code);
const Text = Type.String({ maxLength: FIELD_LIMITS.text });
const NullableText = Nullable(Text);
const Count = Type.Integer({ minimum: 0 });
const Timestamp = Identifier(FIELD_LIMITS.timestamp);
const Hash = Identifier(FIELD_LIMITS.hash);
const DurationMs = Type.Integer({ minimum: 1, maximum: 86_400_000 });
/** `address:port` on a node's private network: IPv4, or IPv6 in brackets (routing.remote). */
const Endpoint = Type.String({ maxLength: 64, pattern: '^(?:[0-9]{1,3}(?:\\.[0-9]{1,3}){3}|\\[[0-9a-fA-F:.]{2,45}\\]):[0-9]{1,5}$' });
/** The most remote endpoints one route carries (the replicas of a service on other nodes). */
const LIMITS_REMOTE = 100;

/**
 * One HTTP health probe as the agent saw it (capability `workload.healthCheck`): when, the HTTP status
 * (null when none came back), the error (refused, timed out, …; null when an answer came), how long it
 * took, and the first 200 bytes of the body with every byte outside printable ASCII replaced by `?`.
 */
export const ProbeEvidence = Type.Object({
  at: Timestamp,
  status: Nullable(Type.Integer({ minimum: 0, maximum: 999 })),
  error: NullableText,
  latencyMs: Count,
  body: Type.String({ maxLength: 200, pattern: '^[\\x20-\\x7e]*$' }),
});
export type ProbeEvidence = Static<typeof ProbeEvidence>;

/** A container's health: its image's check, or the workload's HTTP check (capability `workload.healthCheck`). */
const ContainerHealth = Type.Union([Type.Literal('none'), Type.Literal('starting'), Type.Literal('healthy'), Type.Literal('unhealthy')]);

export const ContainerState = Type.Object({
  containerId: Id,
  serviceId: Id,
  deploymentId: Id,
  name: Name,
  state: Type.Union([
    Type.Literal('created'),
    Type.Literal('running'),
    Type.Literal('restarting'),
    Type.Literal('paused'),
    Type.Literal('exited'),
    Type.Literal('dead'),
    Type.Literal('removing'),
  ]),
  exitCode: Nullable(Type.Integer()),
  health: ContainerHealth,
  restartCount: Count,
  since: Timestamp,
  /** The kernel killed its process for exceeding its memory limit (last exit); sent by agents with `workload.resources`. */
  oomKilled: Type.Optional(Type.Boolean()),
  /** Capability `workload.healthCheck`: the last HTTP probe of the workload's health check (then `health` is its verdict). */
  lastProbe: Type.Optional(ProbeEvidence),
  /** Capability `workload.allocations`: the allocation the container runs (its `tether.allocation` label); absent on other containers. */
  allocationId: Type.Optional(Id),
});
export type ContainerState = Static<typeof ContainerState>;

export const RuntimeStatus = Type.Object({
  available: Type.Boolean(),
  error: NullableText,
});
export type RuntimeStatus = Static<typeof RuntimeStatus>;

/** Reloads since the agent's state began, per kind (see `ReloadKind`). */
export const ReloadKindCounts = Type.Object({
  initial: Count,
  repairEmpty: Count,
  change: Count,
  repairDrift: Count,
  /** The one load that moved the node to the static proxy config (capability `proxy.static`); absent from other agents. */
  staticMove: Type.Optional(Count),
});
export type ReloadKindCounts = Static<typeof ReloadKindCounts>;

/** Canary drops per cause (see `CanaryDropCause`). */
export const CanaryDropCounts = Type.Object({ reload: Count, proxyRestarted: Count, proxyUnreachable: Count, unexplained: Count });
export type CanaryDropCounts = Static<typeof CanaryDropCounts>;

/** What the agent's canary connection through its own proxy saw (absent when the canary is off). */
export const CanaryStatus = Type.Object({
  /** The canary WebSocket is open through the proxy now. */
  connected: Type.Boolean(),
  dropsToday: Count,
  dropsTotal: Count,
  /** Since the agent's state began, per cause; `today` for the current UTC day. */
  causesTotal: CanaryDropCounts,
  causesToday: CanaryDropCounts,
  lastDropAt: Nullable(Timestamp),
  lastDropCause: NullableText,
  /** HTTP probes through the proxy that failed, since the agent's state began. */
  httpFailuresTotal: Count,
});
export type CanaryStatus = Static<typeof CanaryStatus>;

/**
 * The last end-to-end probe of one customer route through the agent's own proxy (capability `routes.probe`):
 * `serving` is an answer the app made (a status below 500 without `x-tether-proxy`); anything else is
 * `failing`: an answer the proxy made (`madeBy: proxy`: marked, or a 502/503/504 of an unmarked config),
 * a 5xx of the app, or no answer at all (`status` null, `error` says why: refused, reset, timed out, TLS).
 */
/**
 * The certificate of a route's domain as a TLS client (the agent's probe) sees it: issuer as RFC 4514, validity
 * as ISO 8601, serial as lowercase hex without colons; null fields until one was seen. `lastError` (null: nothing
 * wrong) is, first match wins: why none is requested (the name's DNS points elsewhere, see RouteNotProbed), the
 * CA's last issuance error from Caddy's log (`certificate issuance failed (<time>): …`, static config), or the
 * probe's handshake failure.
 */
export const RouteCertificate = Type.Object({
  issuer: NullableText,
  notBefore: Nullable(Timestamp),
  notAfter: Nullable(Timestamp),
  serial: Nullable(Type.String({ maxLength: 128, pattern: '^[0-9a-f]+$' })),
  lastError: NullableText,
});
export type RouteCertificate = Static<typeof RouteCertificate>;

/** An IPv4 or IPv6 address in text. */
const IpAddress = Type.String({ maxLength: 45, pattern: '^[0-9A-Fa-f:.]+$' });

/**
 * Why a route over TLS with the ACME issuer was not probed (no TLS handshake made, so no certificate requested: a
 * failed validation counts against the CA's limits): its name does not resolve to an address of this host
 * (`dns-elsewhere`, `resolved` may be empty) or its lookup failed (`dns-error`). The probe then reads `failing`,
 * `madeBy: none`, `error` saying so (what an older panel shows); a panel that knows this field reads the route `unknown`.
 */
export const RouteNotProbed = Type.Object({
  reason: Type.Union([Type.Literal('dns-elsewhere'), Type.Literal('dns-error')]),
  /** The name's A and AAAA addresses as resolved. */
  resolved: Type.Array(IpAddress, { maxItems: 64 }),
  /** The addresses this host is reached at (TETHER_PUBLIC_ADDRESSES, else its interfaces'). */
  hostAddresses: Type.Array(IpAddress, { maxItems: 64 }),
});
export type RouteNotProbed = Static<typeof RouteNotProbed>;

export const RouteProbe = Type.Object({
  domain: Name,
  pathPrefix: Nullable(Identifier(FIELD_LIMITS.pathPrefix)),
  state: Type.Union([Type.Literal('serving'), Type.Literal('failing')]),
  at: Timestamp,
  status: Nullable(Type.Integer({ minimum: 0, maximum: 999 })),
  /** Who made the answer: the app, the proxy, or nobody (no answer). */
  madeBy: Type.Union([Type.Literal('app'), Type.Literal('proxy'), Type.Literal('none')]),
  error: NullableText,
  latencyMs: Count,
  /** Probes over TLS: the domain's certificate as seen (the last one seen, with the last handshake's error). */
  certificate: Type.Optional(RouteCertificate),
  /** Present when the route was deliberately not probed (its DNS does not point here); absent from older agents. */
  notProbed: Type.Optional(RouteNotProbed),
});
export type RouteProbe = Static<typeof RouteProbe>;

export const RoutingStatus = Type.Object({
  appliedHash: Nullable(Hash),
  /** Every reload, whatever its kind. */
  reloadsTotal: Count,
  /** Disruptive reloads (`change`, `repair-drift`) this UTC day. */
  reloadsToday: Count,
  lastReloadAt: Nullable(Timestamp),
  lastReloadReason: NullableText,
  reloadKinds: Type.Optional(ReloadKindCounts),
  canary: Type.Optional(CanaryStatus),
  /** Capability `routes.probe`: the last probe of each route of the applied map (a route not probed yet is absent). */
  probes: Type.Optional(Type.Array(RouteProbe, { maxItems: 10_000 })),
  /** Capability `routes.probe`: how often each route is probed; a probe older than two intervals is stale. */
  probeIntervalMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })),
});
export type RoutingStatus = Static<typeof RoutingStatus>;

// Optional workload fields, each behind its capability (see `workloadCapabilities`): absent, the image's own.
// A process argument: free text up to `text`, without NUL (it cannot be passed to exec).
const ProcessArg = Type.String({ maxLength: FIELD_LIMITS.text, pattern: '^[^\\u0000]*$' });
/** Capability `workload.command`: `command` replaces the image's ENTRYPOINT (and, alone, clears its CMD); `args` replaces its CMD. */
const WorkloadCommandFields = {
  command: Type.Optional(Type.Array(ProcessArg, { minItems: 1, maxItems: 64 })),
  args: Type.Optional(Type.Array(ProcessArg, { minItems: 1, maxItems: 64 })),
};
/** Capability `workload.resources`: CPUs (Docker NanoCpus) and memory in MiB (Docker Memory, with MemorySwap equal to it). */
export const WorkloadResources = Type.Object({
  cpus: Type.Optional(Type.Number({ minimum: 0.01, maximum: 1024 })),
  memoryMiB: Type.Optional(Type.Integer({ minimum: 6, maximum: 4_194_304 })),
});
export type WorkloadResources = Static<typeof WorkloadResources>;
const WorkloadResourcesFields = { resources: Type.Optional(WorkloadResources) };
/** A volume's name inside its service (the `tether.volume` label): a lowercase RFC 1123 label. */
const VolumeLabel = Type.String({ pattern: '^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$' });
/** Capability `workload.volumes`: named volumes the service owns, mounted at absolute paths without `..`. */
export const WorkloadVolume = Type.Object({
  name: VolumeLabel,
  mountPath: Type.String({ maxLength: FIELD_LIMITS.pathPrefix, pattern: '^(?!.*(?:^|/)\\.\\.(?:/|$))/[^/\\u0000-\\u001f][^\\u0000-\\u001f]*$' }),
  readOnly: Type.Boolean(),
});
export type WorkloadVolume = Static<typeof WorkloadVolume>;
const WorkloadVolumesFields = { volumes: Type.Optional(Type.Array(WorkloadVolume, { maxItems: 10 })) };
/**
 * Capability `workload.healthCheck`: an HTTP GET the agent makes from outside the container to its address
 * on Tether's network. A new container counts ready after `healthyThreshold` passes in a row (2xx or 3xx);
 * `unhealthyThreshold` failures in a row after `startPeriodSeconds` fail the rollout, or, later, make the
 * container `unhealthy` until it passes again. The panel fills every default, so every field is present.
 */
export const WorkloadHealthCheck = Type.Object({
  path: Type.String({ maxLength: FIELD_LIMITS.pathPrefix, pattern: '^/[\\x21-\\x7e]*$' }),
  port: Type.Integer({ minimum: 1, maximum: 65_535 }),
  intervalSeconds: Type.Integer({ minimum: 1, maximum: 3600 }),
  timeoutSeconds: Type.Integer({ minimum: 1, maximum: 600 }),
  healthyThreshold: Type.Integer({ minimum: 1, maximum: 100 }),
  unhealthyThreshold: Type.Integer({ minimum: 1, maximum: 100 }),
  startPeriodSeconds: Type.Integer({ minimum: 0, maximum: 3600 }),
});
export type WorkloadHealthCheck = Static<typeof WorkloadHealthCheck>;
const WorkloadHealthCheckFields = { healthCheck: Type.Optional(WorkloadHealthCheck) };
/**
 * Capability `workload.drain`: how long the old containers of a rollout keep their open connections after the
 * switch (0: stopped at the switch). The panel sends it to every agent that announced the capability (its
 * default is 30); absent (a panel without the capability), the agent rolls out its previous way: the old
 * containers stop TETHER_DRAIN_MS after the switch, and no `deploy.drained` is sent.
 */
const WorkloadDrainFields = { drainSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 3600 })) };
/**
 * Capability `workload.fence`: work that must never run twice. The agent stops the release's containers once
 * `hello.fence.afterMs` has passed without a frame from any panel, and its rollouts never overlap. Present only
 * when true (absent: not fenced).
 */
const WorkloadFenceFields = { fence: Type.Optional(Type.Literal(true)) };
/**
 * Capability `workload.stop-first`: a rollout of the release stops the old container before the new one starts
 * (a service's rollout.maxSurge 0). Present only when true.
 */
const WorkloadStopFirstFields = { stopFirst: Type.Optional(Type.Literal(true)) };

/** Capability `registry.auth`: credentials for the registry the workload's image comes from. */
export const WorkloadRegistryAuth = Type.Object({
  host: Identifier(FIELD_LIMITS.image),
  username: Type.String({ minLength: 1, maxLength: 256 }),
  password: Type.String({ minLength: 1, maxLength: 4096 }),
});
export type WorkloadRegistryAuth = Static<typeof WorkloadRegistryAuth>;

export const Workload = Type.Object({
  serviceId: Id,
  serviceName: Name,
  deploymentId: Id,
  image: Identifier(FIELD_LIMITS.image),
  // A Record's key schema only picks which properties the value schema applies to; `propertyNames` is what refuses a bad name.
  env: Type.Record(Type.String(), Type.String({ maxLength: FIELD_LIMITS.envValue }), { propertyNames: Identifier(FIELD_LIMITS.envName) }),
  port: Nullable(Type.Integer({ minimum: 1, maximum: 65_535 })),
  replicas: Type.Integer({ minimum: 0, maximum: 100 }),
  ...WorkloadCommandFields,
  ...WorkloadResourcesFields,
  ...WorkloadVolumesFields,
  ...WorkloadHealthCheckFields,
  ...WorkloadDrainFields,
  ...WorkloadFenceFields,
  ...WorkloadStopFirstFields,
  /** Capability `secrets`: values for the container's environment beside `env` (no name in both). */
  secrets: Type.Optional(
    Type.Record(Type.String(), Type.String({ maxLength: FIELD_LIMITS.envValue }), { propertyNames: Identifier(FIELD_LIMITS.envName), maxProperties: 100 }),
  ),
  /** Capability `registry.auth`: the credentials of the image's registry (`host` as registryHostOf(image) gives it). */
  registryAuth: Type.Optional(WorkloadRegistryAuth),
});
export type Workload = Static<typeof Workload>;

/**
 * Capability `workload.allocations`: one release of a service as an `allocations` set carries it: the full
 * workload spec of its deployment without `replicas` (the allocations say how many run, and where).
 */
export const Release = Type.Omit(Workload, ['replicas']);
export type Release = Static<typeof Release>;

/** Capability `workload.allocations`: one replica of one service placed on this node, running release `deploymentId`. */
export const Allocation = Type.Object({
  /** Stable for the replica's life on this node: a new release changes `deploymentId`, never the id. */
  allocationId: Id,
  serviceId: Id,
  /** The release it must run: a `releases` entry of the same frame with the same `serviceId`. */
  deploymentId: Id,
});
export type Allocation = Static<typeof Allocation>;

/** What an allocation is doing on its node (see `AllocationStatus`). */
export const AllocationState = Type.Union([
  Type.Literal('pending'),
  Type.Literal('starting'),
  Type.Literal('running'),
  Type.Literal('failed'),
  Type.Literal('draining'),
]);
export type AllocationState = Static<typeof AllocationState>;

/**
 * Capability `workload.allocations`, agent → panel: one allocation as its node runs it. `deploymentId` is the
 * release it must run (the last set's; for a removed allocation, the one it ran); `runningDeploymentId` the
 * release its serving container runs (the old one mid-rollout and after a failed one; null: none serves).
 */
export const AllocationStatus = Type.Object({
  allocationId: Id,
  serviceId: Id,
  deploymentId: Id,
  runningDeploymentId: Nullable(Id),
  state: AllocationState,
  /** The serving container (null while none is); with the heartbeat's container of the same id for details. */
  containerId: Nullable(Id),
  health: ContainerHealth,
  /** `failed`: why, with a `deploy.result` code; null otherwise. */
  code: Nullable(Code),
  reason: NullableText,
  /** The image `runningDeploymentId` runs, pinned as `deploy.result.imageRef` is; absent while none runs. */
  imageRef: Type.Optional(Identifier(FIELD_LIMITS.image)),
  /** When `state` last changed. */
  since: Timestamp,
  /**
   * Capability `routing.remote`: `address:port` where the serving container's port is published on the node's
   * private address (IPv6 in brackets); null or absent when none is published.
   */
  endpoint: Type.Optional(Nullable(Endpoint)),
});
export type AllocationStatus = Static<typeof AllocationStatus>;

/** A replica of a route's service on another node (capability `routing.remote`): its node and its published endpoint. */
export const RemoteEndpoint = Type.Object({
  node: Name,
  endpoint: Endpoint,
});
export type RemoteEndpoint = Static<typeof RemoteEndpoint>;

/**
 * Capability `certificates.share`: the node that issues the domain's certificate, when it is another one. The
 * agent never asks the CA for it, serves what `certificates` brings, and forwards HTTP-01 challenges for it to
 * `challengeVia` (the issuer's HTTP port on its private address).
 */
export const CertificateIssuer = Type.Object({
  node: Name,
  challengeVia: Endpoint,
});
export type CertificateIssuer = Static<typeof CertificateIssuer>;

export const Route = Type.Object({
  domain: Name,
  pathPrefix: Nullable(Identifier(FIELD_LIMITS.pathPrefix)),
  serviceId: Id,
  upstream: Identifier(FIELD_LIMITS.upstream),
  /**
   * Capability `routing.remote`: the service's serving replicas on other nodes with a live session, in canonical
   * order (by endpoint). Absent for an agent without the capability; the agent answers them only while no local
   * replica serves.
   */
  remote: Type.Optional(Type.Array(RemoteEndpoint, { maxItems: LIMITS_REMOTE })),
  /** Capability `certificates.share`: present only when another node issues this domain's certificate. */
  certificateIssuer: Type.Optional(CertificateIssuer),
});
export type Route = Static<typeof Route>;

export const TimingSchema = Type.Object({
  heartbeatIntervalMs: DurationMs,
  pingIntervalMs: DurationMs,
  panelIdleTimeoutMs: DurationMs,
  agentIdleTimeoutMs: DurationMs,
  ackTimeoutMs: DurationMs,
});

const Containers = Type.Array(ContainerState, { maxItems: 10_000 });
/** Optional protocol features an end speaks (see `CAPABILITIES`); unknown names are ignored. */
const Capabilities = Type.Array(Code, { maxItems: 64 });

/** hello.fence (capability `workload.fence`): how long the agent waits before it fences, and its stop grace. */
export const HelloFence = Type.Object({
  afterMs: DurationMs,
  stopTimeoutMs: Type.Integer({ minimum: 0, maximum: 600_000 }),
});
export type HelloFence = Static<typeof HelloFence>;

export const Hello = Type.Object({
  type: Type.Literal('hello'),
  id: Id,
  node: Name,
  agentVersion: Identifier(FIELD_LIMITS.agentVersion),
  protocolVersion: Type.Integer({ minimum: 0 }),
  containers: Containers,
  runtime: RuntimeStatus,
  routing: RoutingStatus,
  capabilities: Type.Optional(Capabilities),
  /** Capability `routing.remote`: the node's address on the operators' private network (TETHER_PRIVATE_ADDRESS). */
  privateAddress: Type.Optional(Identifier(64)),
  /** Capability `certificates.share`: the port the node's proxy serves plain HTTP on at `privateAddress` (forwarded ACME challenges). */
  challengePort: Type.Optional(Type.Integer({ minimum: 1, maximum: 65_535 })),
  /**
   * Capability `workload.fence`: the agent stops fenced containers `afterMs` after the last frame it received from
   * a panel (TETHER_FENCE_AFTER_MS), each with `stopTimeoutMs` of grace before SIGKILL (TETHER_STOP_TIMEOUT_MS).
   */
  fence: Type.Optional(HelloFence),
});
export type Hello = Static<typeof Hello>;

export const Welcome = Type.Object({
  type: Type.Literal('welcome'),
  id: Id,
  ref: Id,
  sessionId: Id,
  nodeId: Id,
  timing: TimingSchema,
  /** The capabilities of the agent's hello that this panel speaks too. */
  capabilities: Type.Optional(Capabilities),
});
export type Welcome = Static<typeof Welcome>;

export const Heartbeat = Type.Object({
  type: Type.Literal('heartbeat'),
  id: Id,
  seq: Count,
  containers: Containers,
  runtime: RuntimeStatus,
  routing: RoutingStatus,
});
export type Heartbeat = Static<typeof Heartbeat>;

export const Ping = Type.Object({
  type: Type.Literal('ping'),
  id: Id,
});
export type Ping = Static<typeof Ping>;

export const Pong = Type.Object({
  type: Type.Literal('pong'),
  id: Id,
  ref: Id,
});
export type Pong = Static<typeof Pong>;

export const Deploy = Type.Object({
  type: Type.Literal('deploy'),
  id: Id,
  workload: Workload,
});
export type Deploy = Static<typeof Deploy>;

export const Workloads = Type.Object({
  type: Type.Literal('workloads'),
  id: Id,
  workloads: Type.Array(Workload, { maxItems: 10_000 }),
});
export type Workloads = Static<typeof Workloads>;

/**
 * panel → agent, capability `workload.allocations`: the complete set of allocations on this node, with the
 * release each runs. For an agent that named the capability it replaces `deploy` and `workloads` (the one
 * intent path); ACKed at once, like `workloads`.
 */
export const Allocations = Type.Object({
  type: Type.Literal('allocations'),
  id: Id,
  // A node's allocations are bounded like its status report (`allocations.status`) is.
  releases: Type.Array(Release, { maxItems: 2_000 }),
  allocations: Type.Array(Allocation, { maxItems: 2_000 }),
});
export type Allocations = Static<typeof Allocations>;

/**
 * agent → panel, capability `workload.allocations`: every allocation of the last applied set and every removed
 * one still draining, the complete list (one left out is gone). Sent after `welcome` and whenever one changes;
 * not ACKed (the next one repeats the state).
 */
export const AllocationsStatus = Type.Object({
  type: Type.Literal('allocations.status'),
  id: Id,
  /** The `allocations` frame whose set this reports (its `id`); null before the session's first. */
  ref: Nullable(Id),
  // Agent frames stay under MAX_FRAME_BYTES: 2,000 entries of at most ~450 bytes each without a long reason.
  allocations: Type.Array(AllocationStatus, { maxItems: 2_000 }),
});
export type AllocationsStatus = Static<typeof AllocationsStatus>;

export const Ack = Type.Object({
  type: Type.Literal('ack'),
  id: Id,
  ref: Id,
});
export type Ack = Static<typeof Ack>;

export const DeployResult = Type.Object({
  type: Type.Literal('deploy.result'),
  id: Id,
  deploymentId: Id,
  status: Type.Union([Type.Literal('running'), Type.Literal('failed')]),
  reason: Text,
  code: Nullable(Code),
  /**
   * `running` only, from agents that know it (absent from older ones): the image as it ran, pinned so a moved
   * tag cannot change what a rollback to this deployment runs: `<repository>@sha256:…` when the registry gave
   * the image a digest, else the local image id `sha256:…` (an image built or loaded on the node).
   */
  imageRef: Type.Optional(Identifier(FIELD_LIMITS.image)),
});
export type DeployResult = Static<typeof DeployResult>;

/**
 * agent → panel, capability `workload.drain`: the drain after a deployment's switch ended (the old containers
 * it replaced are stopped). Sent once per deployment that reported `running`, after its `deploy.result`; a
 * rollout that replaced nothing reports 0 and 0 at once. Held across reconnects like `deploy.result`, and
 * idempotent on the panel (the first one recorded wins). Counts are proxied requests and streams open on the
 * old containers, null when this agent's proxy cannot count them (docs/architecture.md, "Drain").
 */
export const DeployDrained = Type.Object({
  type: Type.Literal('deploy.drained'),
  id: Id,
  deploymentId: Id,
  /** Open on the old containers when the answers switched to the new ones. */
  connectionsOpenAtSwitch: Nullable(Count),
  /** Still open when the old containers were stopped (the deadline fell first); 0 when they all closed first. */
  connectionsCut: Nullable(Count),
  drainEndedAt: Timestamp,
});
export type DeployDrained = Static<typeof DeployDrained>;

/**
 * agent → panel, capability `allocations.drain` (named only beside `workload.allocations` and `workload.drain`): the
 * drain of one allocation rollout on this node ended. `allocationIds` are the allocations that rollout moved to
 * release `deploymentId` (one rollout per service and release: every allocation the node moved at once); the
 * counts and time are as in `deploy.drained`. A rollout that replaced nothing, or one without overlap, reports 0
 * and 0 at once. Never sent for a removed allocation's drain. Held across reconnects like `deploy.result`; the panel
 * keeps the first report naming an allocation for a deployment and ignores any later one naming it again.
 */
export const AllocationsDrained = Type.Object({
  type: Type.Literal('allocations.drained'),
  id: Id,
  deploymentId: Id,
  allocationIds: Type.Array(Id, { minItems: 1, maxItems: 2_000 }),
  connectionsOpenAtSwitch: Nullable(Count),
  connectionsCut: Nullable(Count),
  drainEndedAt: Timestamp,
});
export type AllocationsDrained = Static<typeof AllocationsDrained>;

export const RoutingMap = Type.Object({
  type: Type.Literal('routing.map'),
  id: Id,
  version: Count,
  hash: Hash,
  routes: Type.Array(Route, { maxItems: 100_000 }),
});
export type RoutingMap = Static<typeof RoutingMap>;

export const RoutingApplied = Type.Object({
  type: Type.Literal('routing.applied'),
  id: Id,
  ref: Id,
  hash: Hash,
  changed: Type.Boolean(),
  reloaded: Type.Boolean(),
  error: NullableText,
  routing: RoutingStatus,
});
export type RoutingApplied = Static<typeof RoutingApplied>;

// Log streams (capability `logs`). Limits in LOG_LIMITS (constants.ts).
const CreditBytes = Type.Integer({ minimum: 0, maximum: 4 * 1024 * 1024 });

/** panel → agent: start streaming a service's container output on this node. */
export const LogsOpen = Type.Object({
  type: Type.Literal('logs.open'),
  id: Id,
  /** Names the stream in every later logs.* message; chosen by the panel, unique per session. */
  streamId: Id,
  serviceId: Id,
  /** The last N lines in total (merged across replicas by time); null: all that Docker kept. */
  tail: Nullable(Type.Integer({ minimum: 0, maximum: 10_000 })),
  /** Only lines at or after this RFC 3339 time; null: no bound. */
  since: Nullable(Timestamp),
  /** Keep streaming new lines (and new containers of the service) until logs.close. */
  follow: Type.Boolean(),
  /** Bytes of logs.chunk frames the agent may send before more credit comes. */
  credit: CreditBytes,
});
export type LogsOpen = Static<typeof LogsOpen>;

/** panel → agent: more bytes the stream may send (its HTTP client read what came). */
export const LogsCredit = Type.Object({
  type: Type.Literal('logs.credit'),
  id: Id,
  streamId: Id,
  bytes: Type.Integer({ minimum: 1, maximum: 4 * 1024 * 1024 }),
});
export type LogsCredit = Static<typeof LogsCredit>;

/** panel → agent: stop the stream (the client left). The agent answers nothing more for it. */
export const LogsClose = Type.Object({
  type: Type.Literal('logs.close'),
  id: Id,
  streamId: Id,
});
export type LogsClose = Static<typeof LogsClose>;

export const LogLine = Type.Object({
  containerId: Id,
  /** The container's name (one per replica). */
  replica: Name,
  stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr')]),
  /** Docker's timestamp of the line (RFC 3339, nanoseconds). */
  time: Timestamp,
  /** The line without its newline, sanitised (invalid UTF-8 replaced, control characters escaped); long lines come in pieces. */
  text: Text,
});
export type LogLine = Static<typeof LogLine>;

/** agent → panel: lines of a stream, in order; the encoded frame is at most LOG_LIMITS.maxChunkBytes and within the stream's credit. */
export const LogsChunk = Type.Object({
  type: Type.Literal('logs.chunk'),
  id: Id,
  streamId: Id,
  lines: Type.Array(LogLine, { minItems: 1, maxItems: 2_000 }),
});
export type LogsChunk = Static<typeof LogsChunk>;

/** agent → panel: the stream ended (all lines sent without follow, or a failure); nothing more comes for it. */
export const LogsEnd = Type.Object({
  type: Type.Literal('logs.end'),
  id: Id,
  streamId: Id,
  code: Code,
  reason: Text,
});
export type LogsEnd = Static<typeof LogsEnd>;

/** Why a proxy reload happened (docs/architecture.md, "Reload kinds"); `static-move` only between ends that both named `proxy.static`. */
export const ReloadKind = Type.Union([Type.Literal('initial'), Type.Literal('repair-empty'), Type.Literal('change'), Type.Literal('repair-drift'), Type.Literal('static-move')]);
export type ReloadKind = Static<typeof ReloadKind>;
/** Where each kind is counted in `ReloadKindCounts` (heartbeats, the agent's state file). */
export const RELOAD_KIND_COUNT_KEY = {
  initial: 'initial',
  'repair-empty': 'repairEmpty',
  change: 'change',
  'repair-drift': 'repairDrift',
  'static-move': 'staticMove',
} as const satisfies Record<ReloadKind, keyof ReloadKindCounts>;
/** Every kind, in the order of the table above (complete: the table must name every kind). */
export const RELOAD_KINDS = Object.keys(RELOAD_KIND_COUNT_KEY) as readonly ReloadKind[];
/**
 * The kinds that sever customers' connections. An initial load and a repair
 * of an empty (restarted) Caddy reach a proxy that holds no connection of ours
 * any more, so "reloads a day" and its alert count only these.
 */
export const DISRUPTIVE_RELOAD_KINDS: ReadonlySet<ReloadKind> = new Set(['change', 'repair-drift', 'static-move']);
export const CanaryDropCause = Type.Union([
  Type.Literal('reload'),
  Type.Literal('proxy-restarted'),
  Type.Literal('proxy-unreachable'),
  Type.Literal('unexplained'),
]);
export type CanaryDropCause = Static<typeof CanaryDropCause>;

/** An event's key: the agent's boot epoch (ms since 1970 when that agent process started) and its sequence number in that boot. */
const EventKey = { epoch: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), seq: Count, at: Timestamp };

export const ReloadEvent = Type.Object({
  ...EventKey,
  event: Type.Literal('reload'),
  kind: ReloadKind,
  hashBefore: Nullable(Hash),
  hashAfter: Hash,
  reason: Text,
});
export type ReloadEvent = Static<typeof ReloadEvent>;

export const CanaryDropEvent = Type.Object({
  ...EventKey,
  event: Type.Literal('canary.drop'),
  cause: CanaryDropCause,
  /** The reason of the reload the drop is attributed to (cause `reload`). */
  reloadReason: NullableText,
  /** The WebSocket close code the canary saw (1006: closed without a close frame); null when the HTTP probe failed. */
  closeCode: Nullable(Type.Integer({ minimum: 0, maximum: 4999 })),
  /** Time from the drop until the canary was through again; null while it is not. */
  reconnectMs: Nullable(Type.Integer({ minimum: 0 })),
});
export type CanaryDropEvent = Static<typeof CanaryDropEvent>;

/** agent → panel, capability `proxy.events`: events to record exactly once; the panel ACKs once they are stored. */
export const ProxyEvents = Type.Object({
  type: Type.Literal('proxy.events'),
  id: Id,
  events: Type.Array(Type.Union([ReloadEvent, CanaryDropEvent]), { minItems: 1, maxItems: 500 }),
});
export type ProxyEvents = Static<typeof ProxyEvents>;

/**
 * panel → agent, capability `workload.volumes`: the service was deleted with `deleteVolumes`; remove its
 * containers on this node (if any are left) and then its named volumes. ACKed at once, before the work.
 * Capability `volumes.inventory`: with `names`, only those volumes of the service (a kept volume deleted
 * through `DELETE /v1/volumes/:id`); sent only to an agent that named it.
 */
export const VolumesRemove = Type.Object({
  type: Type.Literal('volumes.remove'),
  id: Id,
  serviceId: Id,
  names: Type.Optional(Type.Array(VolumeLabel, { minItems: 1, maxItems: 10 })),
});
export type VolumesRemove = Static<typeof VolumesRemove>;

/** One of the node's named volumes in `volumes.report`. */
export const ReportedVolume = Type.Object({
  /** The Docker volume's name (`tether-<serviceId>-<volume>`). */
  dockerName: Name,
  serviceId: Id,
  /** Its `tether.volume` label: the name in the service's `volumes`. */
  volume: VolumeLabel,
  createdAt: Nullable(Timestamp),
  /** Bytes on disk of its data folder; null when not measured (over the budget, unreadable, not yet). */
  sizeBytes: Nullable(Count),
  measuredAt: Nullable(Timestamp),
});
export type ReportedVolume = Static<typeof ReportedVolume>;

/**
 * agent → panel, capability `volumes.inventory`: every named volume labelled with this node, the complete
 * set (a volume left out is gone). Sent after `welcome`, when the set or a size changes, and again every
 * measure interval; not ACKed (the next report repeats it).
 */
export const VolumesReport = Type.Object({
  type: Type.Literal('volumes.report'),
  id: Id,
  volumes: Type.Array(ReportedVolume, { maxItems: 2_000 }),
});
export type VolumesReport = Static<typeof VolumesReport>;

/** A PEM text: a certificate chain or a private key (bounded: a chain of a few certificates, a key). */
const Pem = Type.String({ minLength: 1, maxLength: 65_536, pattern: '^-----BEGIN [A-Z0-9 ]+-----\\n' });

/** One domain's certificate as its issuer's proxy stored it (capability `certificates.share`). */
export const SharedCertificate = Type.Object({
  domain: Name,
  /** The chain, leaf first, PEM. */
  certificatePem: Pem,
  /** The leaf's private key, PEM: a secret (never logged, never in an API answer). */
  keyPem: Pem,
  /** The leaf's notAfter (ISO 8601). */
  notAfter: Timestamp,
});
export type SharedCertificate = Static<typeof SharedCertificate>;

/**
 * agent → panel, capability `certificates.share`: certificates this node's proxy obtained for domains it issues
 * (every one at session open, then each new or renewed one). ACKed once stored; sent again until ACKed.
 */
export const CertificatesReport = Type.Object({
  type: Type.Literal('certificates.report'),
  id: Id,
  certificates: Type.Array(SharedCertificate, { minItems: 1, maxItems: 10 }),
});
export type CertificatesReport = Static<typeof CertificatesReport>;

/**
 * panel → agent, capability `certificates.share`: the complete set of certificates this node serves for domains
 * another node issues (one left out is no longer this node's to serve). ACKed at once.
 */
export const Certificates = Type.Object({
  type: Type.Literal('certificates'),
  id: Id,
  // A state frame (up to MAX_STATE_FRAME_BYTES): 2,000 chains with their keys fit.
  certificates: Type.Array(SharedCertificate, { maxItems: 2_000 }),
});
export type Certificates = Static<typeof Certificates>;

export const ErrorMessage = Type.Object({
  type: Type.Literal('error'),
  id: Id,
  ref: Nullable(Id),
  code: Code,
  message: Text,
});
export type ErrorMessage = Static<typeof ErrorMessage>;

/** Every message schema by its `type`. */
export const MESSAGE_SCHEMAS = {
  hello: Hello,
  welcome: Welcome,
  heartbeat: Heartbeat,
  ping: Ping,
  pong: Pong,
  deploy: Deploy,
  workloads: Workloads,
  allocations: Allocations,
  'allocations.status': AllocationsStatus,
  ack: Ack,
  'deploy.result': DeployResult,
  'deploy.drained': DeployDrained,
  'allocations.drained': AllocationsDrained,
  'routing.map': RoutingMap,
  'routing.applied': RoutingApplied,
  'proxy.events': ProxyEvents,
  'logs.open': LogsOpen,
  'logs.credit': LogsCredit,
  'logs.close': LogsClose,
  'logs.chunk': LogsChunk,
  'logs.end': LogsEnd,
  'volumes.remove': VolumesRemove,
  'volumes.report': VolumesReport,
  'certificates.report': CertificatesReport,
  certificates: Certificates,
  error: ErrorMessage,
} as const;

export type MessageType = keyof typeof MESSAGE_SCHEMAS;
export const MESSAGE_TYPES = Object.keys(MESSAGE_SCHEMAS) as MessageType[];

export const Message = Type.Union(Object.values(MESSAGE_SCHEMAS));
export type Message = { [K in MessageType]: Static<(typeof MESSAGE_SCHEMAS)[K]> }[MessageType];
export type MessageOf<T extends MessageType> = Extract<Message, { type: T }>;

/** The types an agent sends and a panel receives, declared once: the panel's gateway accepts these (after `hello`). */
export const AGENT_MESSAGE_TYPES = Object.freeze([
  'hello', 'heartbeat', 'pong', 'ack', 'deploy.result', 'deploy.drained', 'allocations.drained', 'routing.applied', 'proxy.events', 'logs.chunk', 'logs.end', 'volumes.report', 'allocations.status', 'certificates.report', 'error',
] as const satisfies readonly MessageType[]);
/** The types a panel sends and an agent receives. */
export const PANEL_MESSAGE_TYPES = Object.freeze([
  'welcome', 'ping', 'deploy', 'workloads', 'routing.map', 'logs.open', 'logs.credit', 'logs.close', 'volumes.remove', 'allocations', 'certificates', 'ack', 'error',
] as const satisfies readonly MessageType[]);

/** Messages the agent sends and the panel receives. */
export type AgentMessage = MessageOf<(typeof AGENT_MESSAGE_TYPES)[number]>;
/** Messages the panel sends and the agent receives. */
export type PanelMessage = MessageOf<(typeof PANEL_MESSAGE_TYPES)[number]>;
