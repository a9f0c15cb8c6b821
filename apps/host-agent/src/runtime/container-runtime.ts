import type { PortBinding } from './published-port.js';

// The seam between reconciliation and the container engine. The controller
// only talks to this interface; DockerContainerRuntime implements it with
// dockerode. Every method rejects with a RuntimeError (see errors.ts).

export type EngineState = 'created' | 'running' | 'restarting' | 'paused' | 'exited' | 'dead' | 'removing';
export type HealthState = 'none' | 'starting' | 'healthy' | 'unhealthy';

/** One row of a list call: cheap, but without exit code or timestamps. */
export interface ContainerSummary {
  id: string;
  name: string;
  labels: Record<string, string>;
  state: EngineState;
  /** Docker's human status ("Up 3 seconds (healthy)"); health is read from it. */
  status: string;
}

/** What an inspect call tells. Timestamps are ISO strings, null when the event never happened. */
export interface ContainerDetails {
  id: string;
  name: string;
  labels: Record<string, string>;
  state: EngineState;
  exitCode: number | null;
  oomKilled: boolean;
  /** The engine's own error for the last start (e.g. "exec: …: not found"). */
  error: string | null;
  health: HealthState;
  /** Output and exit code of the most recent health probe. */
  lastHealthOutput: string | null;
  /** Restarts Docker itself performed (restart policy); Tether sets none, so usually 0. */
  restartCount: number;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  /** Image has a HEALTHCHECK (or the container was created with one). */
  hasHealthcheck: boolean;
  /** The container's address on each network it joined (the canary reaches Caddy by it). */
  ipAddresses?: Record<string, string>;
  /** Ports published on the host now (NetworkSettings.Ports: empty while the container is stopped). */
  ports?: PortBinding[];
}

export interface ContainerSpec {
  name: string;
  image: string;
  env: Record<string, string>;
  labels: Record<string, string>;
  /** Network the container joins at create, with these aliases; `container:<id>`: that container's network namespace (the answerer). */
  network: string;
  aliases: string[];
  exposedPort: number | null;
  /** Replaces the image's ENTRYPOINT (Docker then does not apply the image's CMD either). */
  entrypoint?: string[];
  /** Replaces the image's CMD. */
  cmd?: string[];
  /** CPU limit in units of 1e-9 CPUs (Docker NanoCpus). */
  nanoCpus?: number;
  /** Memory limit in bytes; swap is limited to the same (MemorySwap = Memory), so the limit holds. */
  memoryBytes?: number;
  /** Named volumes (never host paths) to mount. */
  volumes?: VolumeMount[];
  /**
   * Host ports to publish, by container port ("80/tcp"): the proxy's, and an allocation's on the node's private
   * address (routing.remote). No `hostPort`: Docker picks a free one.
   */
  publish?: Record<string, { hostIp: string; hostPort?: number }>;
  /** Only the proxy containers use the fields below. */
  user?: string;
  /** Host folders to mount ("host:container"). */
  binds?: string[];
  /** Docker's restart policy; default "no": the agent owns service restarts. */
  restartPolicy?: 'no' | 'unless-stopped';
  sysctls?: Record<string, string>;
}

export interface VolumeMount {
  /** The Docker volume's name. */
  source: string;
  target: string;
  readOnly: boolean;
}

/** A named Docker volume as the engine lists it. */
export interface VolumeSummary {
  name: string;
  labels: Record<string, string>;
  createdAt: string | null;
  /** Where the engine keeps its data on the host (`…/volumes/<name>/_data`); null when it does not say. */
  mountpoint: string | null;
}

export interface RuntimeEvent {
  /** die, start, health_status: healthy, destroy, … */
  action: string;
  containerId: string;
  labels: Record<string, string>;
}

export interface EventHandlers {
  onEvent(event: RuntimeEvent): void;
  /** The stream is open: events from now on will arrive. */
  onOpen(): void;
  /** The stream ended or failed; no more events will arrive on it. */
  onClose(error: Error | null): void;
}

export interface EventSubscription {
  close(): void;
}

export interface CallOptions {
  /** Bound on this call; the implementation's default when absent. */
  timeoutMs?: number;
}

/** Credentials for one pull (Docker's X-Registry-Auth). */
export interface RegistryAuth {
  username: string;
  password: string;
  /** The registry host (`127.0.0.1:5000`, `docker.io`). */
  serveraddress: string;
}

export interface ContainerRuntime {
  /** Containers (running or not) carrying every one of `labels`. */
  list(labels: Record<string, string>, options?: CallOptions): Promise<ContainerSummary[]>;
  inspect(id: string, options?: CallOptions): Promise<ContainerDetails>;
  /** Creates (does not start) a container; returns its id. */
  create(spec: ContainerSpec): Promise<string>;
  start(id: string): Promise<void>;
  /** Graceful stop: the image's stop signal, then SIGKILL after `graceMs`. Stopping a stopped container is not an error. */
  stop(id: string, graceMs: number): Promise<void>;
  /** Removes a container (forcefully); a container already gone is not an error. */
  remove(id: string): Promise<void>;
  imagePresent(image: string): Promise<boolean>;
  /** The local image's id (`sha256:…` of its config) for a reference; null when the engine has none. */
  imageId(image: string): Promise<string | null>;
  /** The local image's id and the registry digests it was pulled by (`repository@sha256:…`); null when the engine has none. */
  imageIdentity(image: string): Promise<{ id: string; repoDigests: string[] } | null>;
  /**
   * Pulls an image (with `auth`, the registry's credentials), failing with IMAGE_PULL_FAILED after `timeoutMs`
   * rather than hanging; the error keeps the daemon's words (image-access.ts turns them into registry codes).
   */
  pull(image: string, timeoutMs: number, auth?: RegistryAuth): Promise<void>;
  ensureNetwork(name: string): Promise<void>;
  /**
   * Gives a running container that has no connections yet `aliases` on `network`: it leaves the network and
   * joins it again with them (Docker cannot add an alias to an endpoint). Only for a container nobody dials yet.
   */
  joinAliases(id: string, network: string, aliases: string[]): Promise<void>;
  /** Creates a named volume with `labels`; one that exists already is kept as it is (with its data). */
  ensureVolume(name: string, labels: Record<string, string>): Promise<void>;
  /** Named volumes carrying every one of `labels`. */
  listVolumes(labels: Record<string, string>): Promise<VolumeSummary[]>;
  /** Removes a named volume; one already gone is not an error. */
  removeVolume(name: string): Promise<void>;
  /** Last lines a container wrote (stdout and stderr), for failure reasons. */
  logsTail(id: string, lines: number): Promise<string>;
  /** Container events for containers carrying every one of `labels`. */
  events(labels: Record<string, string>, handlers: EventHandlers): EventSubscription;
}
