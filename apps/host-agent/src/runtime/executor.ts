import { errorMessage, sleep, truncate, type Logger } from '@tether/common';
import { FIELD_LIMITS } from '@tether/protocol';
import type { Workload } from '@tether/protocol';
import type { DeployOutcome } from '../controllers.js';
import type { ContainerRuntime, ContainerSpec } from './container-runtime.js';
import { RUNTIME_ERROR_CODES, RuntimeError } from './errors.js';
import { ensureImage, type PrivateImages } from './image-access.js';
import type { Action, ActualContainer } from './plan.js';
import { waitUntilReady, type ReadinessTarget } from './readiness.js';
import { joinService, waitUntilChecked } from './health-gate.js';
import type { HealthMonitor } from './health-monitor.js';
import { containerSpec, nodeSelector, volumeLabels, volumeName } from './workload-spec.js';
import type { RuntimeTiming } from './settings.js';
import type { Drainer } from './drainer.js';
import type { DrainRecord } from './drain-book.js';

// Applies plan() actions through ContainerRuntime. The only place that
// changes containers.

export interface ContainerFailure {
  serviceId: string;
  deploymentId: string;
  containerId: string;
  name: string;
  code: string;
  reason: string;
}

export interface ExecutorDeps {
  runtime: ContainerRuntime;
  node: string;
  network: string;
  /** Where allocation containers publish their port (TETHER_PRIVATE_ADDRESS, routing.remote); absent or null: nowhere. */
  privateAddress?: string | null;
  timing: RuntimeTiming;
  logger: Logger;
  /** The HTTP health checks of running containers (capability `workload.healthCheck`). */
  health: HealthMonitor;
  /** Images pulled with credentials, and the credentials checked for them (image-access.ts). */
  images: PrivateImages;
  /** Drains of rollouts whose workload has `drainSeconds` (drainer.ts); their containers are its own to remove. */
  drainer: Drainer;
  /** Called after every change to a container, so cached details are read again. */
  touched(id: string): void;
  restarted(id: string): void;
  failed(failure: ContainerFailure): void;
}

export type RolloutAction = Extract<Action, { kind: 'create' | 'replace' }>;

export interface RolloutResult {
  outcome: DeployOutcome;
  /** Deployments whose containers this rollout retired. */
  superseded: string[];
  /** Draining, stopping and removing the retired containers; runs on after the outcome is known. */
  cleanup: Promise<void>;
  /** With `drainSeconds`: the drain the switch recorded, to follow once the outcome is reported (not in `cleanup`: it may last an hour). */
  drain?: DrainRecord;
}


export const failed = (err: unknown): DeployOutcome => {
  const code = err instanceof RuntimeError ? err.code : RUNTIME_ERROR_CODES.DOCKER_ERROR;
  return { status: 'failed', code, reason: truncate(errorMessage(err), FIELD_LIMITS.text) };
};

/** The containers a rollout makes: one per replica slot, unless the caller names them (an allocation's, allocation-rollout.ts). */
export const slotSpecs = (deps: ExecutorDeps, action: RolloutAction): ContainerSpec[] => action.replicas.map((replica) => containerSpec(deps.node, deps.network, action.workload, replica));

/** Creates a container; a leftover of this node under the same name (an interrupted attempt) is removed first. */
async function createFresh(deps: ExecutorDeps, spec: ContainerSpec): Promise<string> {
  try {
    return await deps.runtime.create(spec);
  } catch (err) {
    if (!(err instanceof RuntimeError && err.code === RUNTIME_ERROR_CODES.DOCKER_CONFLICT)) throw err;
    const mine = await deps.runtime.list({ ...nodeSelector(deps.node) });
    const leftover = mine.find((c) => c.name === spec.name);
    if (!leftover) throw err;
    deps.logger.warn({ container: spec.name }, 'removing a leftover container that holds the name');
    await deps.runtime.remove(leftover.id);
    return deps.runtime.create(spec);
  }
}

/**
 * Takes a container out of service: stopped while still on Tether's network,
 * then removed (which takes it out of the network and the alias). Stopping
 * first is what lets its connections end: in-flight requests finish within the
 * stop grace, and a proxy's pooled keep-alive connections and WebSockets get
 * a FIN, so the proxy dials again and Docker's DNS answers with the new
 * containers. Detached first, they were black-holed (no FIN, no RST): the next
 * request on a pooled connection hung, Caddy having no response timeout.
 */
export async function retire(deps: ExecutorDeps, container: ActualContainer): Promise<void> {
  // A draining container is stopped by its drain, at its deadline (drainer.ts), never earlier by a pass.
  if (deps.drainer.draining().has(container.id)) return;
  const { runtime, timing } = deps;
  deps.touched(container.id);
  if (container.state === 'running') {
    await sleep(timing.drainMs);
    await runtime.stop(container.id, timing.stopTimeoutMs);
  }
  await runtime.remove(container.id);
  deps.touched(container.id);
}

/** Stop (SIGTERM, TETHER_STOP_TIMEOUT_MS of grace, SIGKILL) while still on the network, then remove. */
export async function stopAndRemove(deps: ExecutorDeps, container: { id: string }): Promise<void> {
  deps.touched(container.id);
  await deps.runtime.stop(container.id, deps.timing.stopTimeoutMs);
  await deps.runtime.remove(container.id);
  deps.touched(container.id);
}

/**
 * Zero-downtime rollout: new containers start on Tether's network under the
 * service alias beside the old ones; only when every new one is ready are the
 * old ones stopped and removed (see retire). While an old one stops, dials to
 * it are refused and a dialer that tries every resolved address (Go's, so
 * Caddy) reaches a new one. On failure the new containers are removed and
 * the old ones never noticed.
 */
export async function rollout(
  deps: ExecutorDeps,
  action: RolloutAction,
  specs: ContainerSpec[] = slotSpecs(deps, action),
  /** An allocation rollout's allocations: its drain is reported as theirs (allocations.drained). */
  allocationIds?: readonly string[],
): Promise<RolloutResult> {
  const { runtime } = deps;
  const { workload } = action;
  const keep = action.kind === 'replace' ? action.keep : [];
  const old = action.kind === 'replace' ? action.retire : [];
  const created: string[] = [];
  try {
    await prepare(deps, workload);
    await startAndCheck(deps, workload, specs, keep, created);
  } catch (err) {
    deps.logger.warn({ deploymentId: workload.deploymentId, err }, 'rollout failed; the running containers stay');
    await Promise.all(created.map((id) => runtime.remove(id).then(() => deps.touched(id)).catch(() => undefined)));
    return { outcome: failed(err), superseded: [], cleanup: Promise.resolve() };
  }
  const count = specs.length + keep.length;
  const outcome: DeployOutcome = { status: 'running', reason: `${count}/${workload.replicas} replicas running${old.length ? `, replaced ${old.length} old container(s)` : ''}` };
  const superseded = [...new Set(old.map((c) => c.deploymentId))];
  if (workload.drainSeconds !== undefined && old.length > 0) {
    // The switch: the old containers leave the answers; their drain runs on after `running` (drainer.ts).
    const drain = await deps.drainer.switchAway(workload, old, workload.drainSeconds, allocationIds);
    outcome.reason += `; draining them for up to ${workload.drainSeconds} s`;
    deps.logger.info({ deploymentId: workload.deploymentId, retired: old.length, drainSeconds: workload.drainSeconds, openAtSwitch: drain.openAtSwitch }, 'rollout switched; draining');
    return { outcome, superseded, cleanup: Promise.resolve(), drain };
  }
  deps.logger.info({ deploymentId: workload.deploymentId, retired: old.length }, 'rollout switched');
  const cleanup = Promise.all(
    old.map((c) => retire(deps, c).catch((err: unknown) => deps.logger.warn({ container: c.name, err }, 'retiring an old container failed; the next pass retries'))),
  ).then(() => undefined);
  return { outcome, superseded, cleanup };
}

/** Everything a rollout needs before it touches a container: the image, Tether's network, the service's volumes. */
export async function prepare(deps: ExecutorDeps, workload: Workload): Promise<void> {
  await ensureImage(deps.runtime, deps.images, workload, deps.timing.pullTimeoutMs);
  await deps.runtime.ensureNetwork(deps.network);
  await ensureVolumes(deps, workload);
}

/**
 * Creates and starts the containers of `specs`, brings `keep` up, and waits
 * until all are ready. The ids of the containers it made are pushed to
 * `created` as it goes, so a caller can remove them when it throws.
 */
export async function startAndCheck(deps: ExecutorDeps, workload: Workload, specs: ContainerSpec[], keep: ActualContainer[], created: string[]): Promise<void> {
  const { runtime, timing } = deps;
  const targets: ReadinessTarget[] = [];
  const made: string[] = [];
  try {
    for (const spec of specs) {
      const id = await createFresh(deps, spec);
      created.push(id);
      made.push(id);
      // Held out of the proxy's answers from before its start: it carries its service's label, and is tracked (and so
      // left out by its verdict) only once it runs and has an address.
      if (workload.healthCheck) deps.health.hold(id);
      await runtime.start(id);
      deps.touched(id);
      // An HTTP health check proves readiness itself; the image's own check and the min-ready time are for those without.
      targets.push({ id, minReadyMs: workload.healthCheck ? 0 : timing.minReadyMs });
    }
    for (const c of keep) {
      if (c.state !== 'running') {
        await runtime.start(c.id);
        deps.touched(c.id);
      }
      targets.push({ id: c.id, minReadyMs: c.state === 'running' ? 0 : timing.minReadyMs });
    }
    await waitUntilReady(runtime, targets, { timeoutMs: timing.startTimeoutMs, pollMs: timing.readinessPollMs, logLines: 5 });
    if (workload.healthCheck) {
      const gate = { runtime, network: deps.network, health: deps.health, pollMs: timing.readinessPollMs, timeoutMs: timing.startTimeoutMs, touched: deps.touched };
      await waitUntilChecked(gate, workload, made);
      await joinService(gate, workload, made);
    }
  } catch (err) {
    for (const id of made) deps.health.untrack(id);
    throw err;
  }
}

/** The service's named volumes, created at its first deploy and kept (with their data) by every later one. */
export async function ensureVolumes(deps: ExecutorDeps, workload: Workload): Promise<void> {
  for (const v of workload.volumes ?? []) {
    await deps.runtime.ensureVolume(volumeName(workload.serviceId, v.name), volumeLabels(deps.node, workload.serviceId, v.name));
  }
}

/** Applies the actions that are not rollouts: restarts, starts, removals, reports. Errors are logged; the next pass retries. */
export async function applyMaintenance(deps: ExecutorDeps, actions: Action[]): Promise<void> {
  for (const action of actions) {
    try {
      switch (action.kind) {
        case 'restart':
          deps.logger.info({ container: action.container.name, attempt: action.attempt, exitCode: action.container.exitCode }, 'restarting crashed container');
          try {
            await deps.runtime.start(action.container.id);
          } catch (err) {
            // A daemon that is not there did not refuse the container: that attempt does not count against its budget.
            if (!(err instanceof RuntimeError && err.code === RUNTIME_ERROR_CODES.RUNTIME_UNAVAILABLE)) deps.restarted(action.container.id);
            throw err;
          }
          deps.restarted(action.container.id);
          deps.touched(action.container.id);
          break;
        case 'start':
          await deps.runtime.start(action.container.id);
          deps.touched(action.container.id);
          break;
        case 'remove':
          deps.logger.info({ container: action.container.name, reason: action.reason }, 'removing container');
          await retire(deps, action.container);
          break;
        case 'fail-deployment':
          deps.failed({
            serviceId: action.serviceId,
            deploymentId: action.container.deploymentId,
            containerId: action.container.id,
            name: action.container.name,
            code: action.code,
            reason: action.reason,
          });
          break;
        default:
          break;
      }
    } catch (err) {
      deps.logger.warn({ action: action.kind, serviceId: action.serviceId, err }, 'reconcile action failed');
    }
  }
}
