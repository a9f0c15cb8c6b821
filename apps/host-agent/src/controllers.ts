import type { Allocation, AllocationStatus, CanaryDropEvent, ContainerState, Release, ReloadEvent, ReportedVolume, Route, RoutingStatus, RuntimeStatus, SharedCertificate, Workload } from '@tether/protocol';

// The seams between the agent's panel session and the two things it drives.
// The session (connection/) only talks to these interfaces; runtime/ (Docker)
// and proxy/ (Caddy) implement them.

export type DeployOutcome =
  /** `imageRef`: the image as it ran, pinned (runtime/image-pin.ts); absent when the engine could not say. */
  | { status: 'running'; reason: string; imageRef?: string }
  | { status: 'failed'; reason: string; code: string };

/** The node's named volumes as `volumes.report` sends them (runtime/volume-inventory.ts). */
export interface VolumeSnapshot {
  volumes: ReportedVolume[];
  /** Grows when the set or a size changed, and once per measure interval: a report is due when it differs. */
  revision: number;
}

/** Drains of this agent run (metrics). */
export interface DrainStats {
  /** Drains that ended in this agent run. */
  ended: number;
  /** Requests and streams still open on old containers when their drain's deadline fell (counted ones only). */
  connectionsCut: number;
}

export interface Observation {
  /** Every Tether container as the runtime reports it now, never as last requested. */
  containers: ContainerState[];
  runtime: RuntimeStatus;
}

export interface WorkloadController {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Reads the real state of every Tether container from the runtime. */
  observe(): Promise<Observation>;
  /**
   * The node is decommissioned or lost (decommission-guard.ts): start nothing from now on; every Tether container
   * leaves the proxy's answers and stops. Absent: the controller runs nothing anyway.
   */
  halt?(): Promise<void>;
  /** A panel welcomed the node again: the next set it sends ends the halt. */
  resume?(): void;
  /** The complete set of workloads the panel wants on this node (sent on join and on change). */
  setDesired(workloads: Workload[]): void;
  /**
   * Carries out one deployment. Idempotent by deployment id: a second delivery
   * of the same id joins the first instead of deploying again.
   */
  deploy(workload: Workload): Promise<DeployOutcome>;
  /**
   * The service was deleted with its volumes: stop running it, remove its containers, then its named
   * volumes (capability `workload.volumes`); with `names`, only those (a kept volume, capability
   * `volumes.inventory`). Resolves once the removal is recorded in the state dir (it survives an agent
   * restart); the work goes on in the background.
   */
  removeVolumes?(serviceId: string, names?: readonly string[]): Promise<void>;
  /** The node's named volumes for `volumes.report` (capability `volumes.inventory`); null before the first scan. */
  volumeSnapshot?(): VolumeSnapshot | null;
  /** The optional workload fields this controller carries out (capabilities announced in hello); absent: none. */
  readonly capabilities?: readonly string[];
  /** Containers that run but are out of the proxy's picks (draining, not yet healthy): routing keeps their address only. */
  notServing?(): ReadonlySet<string>;
  /** Drains of this run; absent: the controller drains nothing. */
  drainStats?(): DrainStats;
  /**
   * Capability `workload.allocations`: the node's complete `allocations` set, from now on its only intent (a later
   * `setDesired` hands the node back to replica slots). Present exactly when the controller announces the capability.
   */
  setAllocations?(set: AllocationSet): void;
  /**
   * TETHER_PRIVATE_ADDRESS: allocation containers publish their port there and `allocations.status` carries each
   * one's `endpoint` (routing.remote); absent: nothing is published.
   */
  readonly privateAddress?: string;
  /** Every allocation as `allocations.status` reports it; null before this agent run's first set. */
  allocationStatus?(): AllocationStatus[] | null;
  /** `listener` runs whenever the allocations' status changes and after every applied set; returns the unsubscribe. */
  onAllocationStatus?(listener: () => void): () => void;
  /**
   * What the workloads report on their own (a drain ended, a container crashed past its restart budget): `listener`
   * runs for each; returns the unsubscribe. The agent (agent.ts) sends them through the panel session.
   */
  onReport?(listener: (report: WorkloadReport) => void): () => void;
  /**
   * Capability workload.fence (with workload.allocations): true stops every container of a fenced release and keeps
   * them stopped; false lets the sets run them again. The session calls it (connection/panel-fence.ts).
   */
  setFenced?(fenced: boolean): void;
}

/** A report the workloads make on their own: a drain that ended, a deployment whose container failed for good. */
export type WorkloadReport =
  | { kind: 'drained'; drain: DrainReport }
  | { kind: 'failed'; deploymentId: string; code: string; reason: string };

/** An `allocations` frame as the controller takes it. */
export interface AllocationSet {
  /** The frame's id (`allocations.status` names it in `ref`). */
  id: string;
  allocations: readonly Allocation[];
  releases: readonly Release[];
}

export interface RoutingMapInput {
  version: number;
  hash: string;
  routes: Route[];
}

export interface RoutingApplyResult {
  hash: string;
  /** The rendered proxy config differed from what was in place. */
  changed: boolean;
  /** The proxy was told to load a new config. */
  reloaded: boolean;
  error: string | null;
  routing: RoutingStatus;
}

export interface RoutingController {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Makes the proxy serve `map`; does nothing when what is in place is identical. */
  apply(map: RoutingMapInput): Promise<RoutingApplyResult>;
  /** Applied hash and reload counters, for hello and every heartbeat. */
  status(): RoutingStatus;
  /**
   * The answerer's health (agent /healthz and /metrics); present exactly when the agent runs a proxy, whose routing
   * is always static (hello names `proxy.static`).
   */
  answerer?(): AnswererHealth;
  /** Customer routes are probed through the proxy (route-probes/): hello names `routes.probe`. */
  readonly probesRoutes?: boolean;
  /** What a drain needs from the proxy (capability `workload.drain`); absent: nothing is proxied (TETHER_PROXY=none). */
  readonly traffic?: ProxyTraffic;
  /**
   * One certificate issuer per domain (capability `certificates.share`): present when the proxy orders its
   * certificates from an ACME CA and can share them (proxy/certificate-share.ts).
   */
  readonly certificateSharing?: CertificateSharing;
}

/** A certificate this node's proxy obtained for a domain it issues, with the stamp that tells a renewal. */
export interface IssuedCertificate {
  certificate: SharedCertificate;
  stamp: string;
}

/** The proxy's side of certificates.share. */
export interface CertificateSharing {
  /** hello.challengePort: the port the proxy serves plain HTTP on at the node's private address. */
  readonly challengePort: number;
  /** The complete set the panel sent (`certificates`): written into the proxy's storage; the domains not written. */
  install(certificates: readonly SharedCertificate[]): Promise<{ failed: string[] }>;
  /** What the proxy holds for domains this node issues that the panel has not stored in that form. */
  unreported(): Promise<IssuedCertificate[]>;
  /** The panel stored (or refused) these: not reported again until they change or a new session begins. */
  markReported(issued: readonly IssuedCertificate[]): void;
  /** A new session: everything is reported again. */
  forgetReported(): void;
}

/**
 * The proxy's side of a drain (docs/architecture.md, "Drain"): taking containers out of new
 * traffic, and counting what is still open on them.
 */
export interface ProxyTraffic {
  /**
   * Makes the containers `notServing` names now leave the proxy's answers at once, and resolves when no new
   * request can be handed to them any more (the proxy's cached lookups expired).
   */
  switchAnswers(): Promise<void>;
  /** Proxied requests and streams open now on these containers. Throws when the proxy cannot be read. */
  openConnections(containerIds: readonly string[]): Promise<number>;
}

/** A drain that ended (agent → panel `deploy.drained`, or `allocations.drained` with `allocationIds`). */
export interface DrainReport {
  deploymentId: string;
  /** An allocation rollout's drain (capability allocations.drain): the allocations it moved to the release. */
  allocationIds?: string[];
  /** Null when the proxy could not be read (or none runs). */
  connectionsOpenAtSwitch: number | null;
  connectionsCut: number | null;
  drainEndedAt: string;
}

/** The static proxy's answerer as the agent's health and metrics show it. */
export interface AnswererHealth {
  up: boolean;
  starts: number;
  restarts: number;
  lastFailure: string | null;
  lastFailureAt: string | null;
  /** Routes with no ready endpoint at the last answers write. */
  unserved: number;
  /** Routes outside the static shape (served by the reload-costing path). */
  legacy: number;
}

/** Events the panel must record exactly once (proxy/event-journal.ts): the session sends them until ACKed. */
export interface PendingEvents {
  pending(): readonly (ReloadEvent | CanaryDropEvent)[];
  /** Keys `<epoch>:<seq>` the panel stored. */
  acknowledge(keys: Iterable<string>): Promise<void>;
  onRecorded(listener: () => void): () => void;
}
