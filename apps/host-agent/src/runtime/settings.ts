// Tunables of the runtime half of the agent. The defaults below are the only
// ones: config.ts takes its environment defaults from them, and
// docs/operations.md documents them.

export interface RuntimeTiming {
  /** Bound on every Docker API call (pulls and stops have their own). */
  callTimeoutMs: number;
  /** Bound on the reads behind one observe(), so a heartbeat is never held up by a frozen daemon. */
  observeTimeoutMs: number;
  pullTimeoutMs: number;
  /** New containers must run (and be healthy, with a HEALTHCHECK) within this. */
  startTimeoutMs: number;
  /** Without a HEALTHCHECK, a new container must stay running this long to count as ready. */
  minReadyMs: number;
  readinessPollMs: number;
  /** Pause between taking an old container out of the alias and stopping it. */
  drainMs: number;
  /** Grace between the stop signal and SIGKILL. */
  stopTimeoutMs: number;
  /** Safety sweep: a full reconcile even when no event arrived. */
  sweepIntervalMs: number;
  eventReconnectMinMs: number;
  eventReconnectMaxMs: number;
}

export interface RestartPolicy {
  /** Restarts of one crashed container before it is reported failed and left exited. */
  budget: number;
  /** Delay before the first restart; doubles per restart up to backoffMaxMs. */
  backoffInitialMs: number;
  backoffMaxMs: number;
  /** Running this long without a crash gives a container its budget back. */
  resetAfterMs: number;
}

export const DEFAULT_RUNTIME_TIMING: RuntimeTiming = Object.freeze({
  callTimeoutMs: 10_000,
  observeTimeoutMs: 2_000,
  pullTimeoutMs: 300_000,
  startTimeoutMs: 60_000,
  minReadyMs: 1_000,
  readinessPollMs: 100,
  drainMs: 1_000,
  stopTimeoutMs: 10_000,
  sweepIntervalMs: 30_000,
  eventReconnectMinMs: 250,
  eventReconnectMaxMs: 10_000,
});

export const DEFAULT_RESTART_POLICY: RestartPolicy = Object.freeze({
  budget: 5,
  backoffInitialMs: 1_000,
  backoffMaxMs: 60_000,
  resetAfterMs: 600_000,
});

/** Docker json-file log rotation set on every container the agent creates. */
export interface ContainerLogOptions {
  /** Largest log file before Docker rotates it (`10m`, `500k`, `1g`). */
  maxSize: string;
  /** Log files kept per container. */
  maxFile: number;
}

export const CONTAINER_LOG_DEFAULTS: Readonly<ContainerLogOptions> = Object.freeze({ maxSize: '10m', maxFile: 3 });
