import { silentLogger, type Logger } from '@tether/common';
import type { DrainReport, ProxyTraffic, WorkloadReport } from '../controllers.js';
import { PendingRemovals, type MeasureBudget } from '../volumes/index.js';
import { VolumeInventory } from './volume-inventory.js';
import { AllocationExecutor } from './allocation-executor.js';
import { workloadCapabilities } from './capabilities.js';
import { ContainerReader } from './container-reader.js';
import type { ContainerRuntime } from './container-runtime.js';
import { DrainBook } from './drain-book.js';
import { Drainer } from './drainer.js';
import { EventWatcher } from './event-watcher.js';
import { stopAndRemove, type ContainerFailure, type ExecutorDeps } from './executor.js';
import { FencedStops } from './fenced-stops.js';
import { Halt } from './halt.js';
import { HealthMonitor } from './health-monitor.js';
import { PrivateImages } from './image-access.js';
import type { PlanContext } from './plan.js';
import type { DeploymentBook } from './deployment-book.js';
import { RestartLedger } from './restart-ledger.js';
import { RuntimeAvailability } from './runtime-availability.js';
import { DEFAULT_RESTART_POLICY, DEFAULT_RUNTIME_TIMING, type RestartPolicy, type RuntimeTiming } from './settings.js';
import { VolumeRemoval } from './volume-removal.js';
import { nodeSelector } from './workload-spec.js';

// The parts beside the Docker workload controller's reconcile loop
// (docker-workload-controller.ts), each in its own file, made here from the
// controller's options: what reads containers, the restart ledger, health
// checks, drains, allocations, the halt, fenced stops, volume removal and the
// inventory, private images, and Docker's event stream. The loop hands them
// the few things they call back (LoopHooks); none of them plans.

export interface DockerWorkloadControllerOptions {
  runtime: ContainerRuntime;
  /** Value of the tether.node label: this agent sees and touches only containers carrying it. */
  node: string;
  /** Tether's Docker network; service containers join it under their service alias. */
  network: string;
  timing?: Partial<RuntimeTiming>;
  restart?: Partial<RestartPolicy>;
  logger?: Logger;
  /** A container crashed past its restart budget (it is left exited; heartbeats show it). */
  onFailure?: (failure: ContainerFailure) => void;
  /** Where the restart counters survive agent restarts (TETHER_STATE_DIR/restart-counters.json); default: memory only. */
  restartCountersFile?: string;
  /** Where ACKed volume removals survive agent restarts (TETHER_STATE_DIR/volume-removals.json); default: memory only. */
  pendingRemovalsFile?: string;
  /** The node's volumes listed and measured for `volumes.report`; absent: volumes.inventory is not announced. */
  volumeInventory?: { scanIntervalMs: number; measureIntervalMs: number; budget?: MeasureBudget };
  /** Where the ids of images pulled with credentials survive agent restarts (TETHER_STATE_DIR/private-images.json); default: memory only. */
  privateImagesFile?: string;
  /** Where drains in progress survive agent restarts (TETHER_STATE_DIR/drains.json); default: memory only. */
  drainsFile?: string;
  /** The proxy's side of a drain (read when a drain needs it: the agent passes its traffic channel, traffic-channel.ts); absent: nothing is proxied. */
  traffic?: () => ProxyTraffic | undefined;
  /** A drain ended (`deploy.drained`). */
  onDrained?: (report: DrainReport) => void;
  /** Where allocation adoptions and failures survive agent restarts (TETHER_STATE_DIR/allocations.json); default: memory only. */
  allocationsFile?: string;
  /** Where drains of removed allocations survive agent restarts (TETHER_STATE_DIR/allocation-drains.json); default: memory only. */
  allocationDrainsFile?: string;
  /** TETHER_PRIVATE_ADDRESS (routing.remote): allocation containers publish their port there; absent: nowhere. */
  privateAddress?: string | null;
  /** Docker's event stream opened: at start and after every loss (a restarted daemon may have rebuilt its firewall chains). */
  onRuntimeReconnect?: () => void;
}

/** What the parts call back on the loop. */
export interface LoopHooks {
  /** Asks for a reconcile pass. */
  reconcile(): void;
  planContext(): PlanContext;
  /** A held-back restart or retry becomes due at `at`. */
  wake(at: number): void;
  /** The service is desired on this node. */
  wanted(serviceId: string): boolean;
  stopped(): boolean;
  /** Runs `work` in the service's lane. */
  enqueue(serviceId: string, work: () => Promise<void>): void;
}

export type WorkloadParts = ReturnType<typeof workloadParts>;

export function workloadParts(options: DockerWorkloadControllerOptions, loop: LoopHooks) {
  const timing: RuntimeTiming = { ...DEFAULT_RUNTIME_TIMING, ...options.timing };
  const restartPolicy: RestartPolicy = { ...DEFAULT_RESTART_POLICY, ...options.restart };
  const logger = options.logger ?? silentLogger;
  const stored = (file: string | undefined) => (file ? { file, logger } : undefined);
  const traffic = () => options.traffic?.();
  // What the workloads report on their own (a drain ended, a container failed for good): the agent sends it.
  const listeners = new Set<(report: WorkloadReport) => void>();
  const report = (r: WorkloadReport) => {
    for (const listener of listeners) listener(r);
  };
  const reader = new ContainerReader(options.runtime, options.node);
  const health = new HealthMonitor({ logger });
  const ledger = new RestartLedger(stored(options.restartCountersFile));
  const inventory = options.volumeInventory ? new VolumeInventory({ runtime: options.runtime, node: options.node, logger, ...options.volumeInventory }) : undefined;
  const privateAddress = options.privateAddress ?? undefined;
  const images = new PrivateImages(stored(options.privateImagesFile));
  const drains = new DrainBook(stored(options.drainsFile));
  const drainer: Drainer = new Drainer({
    book: drains,
    traffic,
    retire: (container) => stopAndRemove(deps, container),
    report: (drain) => {
      options.onDrained?.(drain);
      report({ kind: 'drained', drain });
    },
    logger,
  });
  const deps: ExecutorDeps = {
    drainer,
    runtime: options.runtime,
    images,
    node: options.node,
    network: options.network,
    privateAddress: privateAddress ?? null,
    timing,
    logger,
    health,
    touched: (id) => reader.invalidate(id),
    restarted: (id) => ledger.recordRestart(id),
    failed: (failure) => {
      ledger.markReported(failure.containerId);
      logger.error({ ...failure }, 'container crashed past its restart budget');
      options.onFailure?.(failure);
      report({ kind: 'failed', deploymentId: failure.deploymentId, code: failure.code, reason: failure.reason });
    },
  };
  const allocations = new AllocationExecutor({
    deps,
    reader,
    callTimeoutMs: timing.callTimeoutMs,
    ...(options.allocationsFile ? { allocationsFile: options.allocationsFile } : {}),
    ...(options.allocationDrainsFile ? { drainsFile: options.allocationDrainsFile } : {}),
    traffic,
    planContext: () => loop.planContext(),
    markReported: (id) => ledger.markReported(id),
    wake: (at) => loop.wake(at),
    rolloutDrained: (drain) => report({ kind: 'drained', drain }),
    logger,
  });
  const watcher = new EventWatcher({
    runtime: options.runtime,
    labels: nodeSelector(options.node),
    reconnect: { initialMs: timing.eventReconnectMinMs, maxMs: timing.eventReconnectMaxMs },
    logger,
    onEvent: (event) => {
      reader.invalidate(event.containerId);
      loop.reconcile();
    },
    onState: (open) => {
      reader.setTrusted(open);
      if (!open) return;
      loop.reconcile();
      options.onRuntimeReconnect?.();
    },
  });
  return {
    reports: {
      listen(listener: (report: WorkloadReport) => void): () => void {
        listeners.add(listener);
        return () => void listeners.delete(listener);
      },
    },
    timing,
    restartPolicy,
    logger,
    reader,
    health,
    ledger,
    inventory,
    /** Every optional workload field is carried out here (workload-spec.ts, exclusive-rollout.ts). */
    capabilities: workloadCapabilities({ volumeInventory: inventory !== undefined }),
    privateAddress,
    images,
    drains,
    drainer,
    deps,
    allocations,
    watcher,
    halting: new Halt({ runtime: options.runtime, traffic, stopTimeoutMs: timing.stopTimeoutMs, invalidate: (id) => reader.invalidate(id), logger }),
    fencedStops: new FencedStops({ deps, allocations, reader, callTimeoutMs: timing.callTimeoutMs, logger }),
    availability: new RuntimeAvailability({ node: options.node, logger }),
    volumeRemoval: new VolumeRemoval({
      runtime: options.runtime,
      node: options.node,
      reader,
      removals: new PendingRemovals(stored(options.pendingRemovalsFile)),
      inventory,
      callTimeoutMs: timing.callTimeoutMs,
      retryMinMs: timing.eventReconnectMinMs,
      logger,
      wanted: (serviceId) => loop.wanted(serviceId),
      stopped: () => loop.stopped(),
      enqueue: (serviceId, work) => loop.enqueue(serviceId, work),
    }),
  };
}

/** In this order before the loop's first pass: what earlier runs left is loaded, then the watchers start. */
export async function startParts(p: WorkloadParts): Promise<void> {
  await p.ledger.load();
  await p.volumeRemoval.resume();
  p.inventory?.start();
  await p.images.load();
  // Drains an earlier run left: their containers stay out of the answers and stop at their deadline.
  for (const record of await p.drains.load()) {
    p.logger.info({ deploymentId: record.deploymentId, deadline: new Date(record.deadline).toISOString() }, 'resuming a drain from before the restart');
    p.drainer.follow(record);
  }
  await p.allocations.start();
  p.watcher.start();
}

/** Before the loop stops. */
export async function stopParts(p: WorkloadParts): Promise<void> {
  await p.inventory?.stop();
  p.watcher.stop();
  p.health.stop();
  await p.drainer.stop();
  await p.allocations.stop();
}

/** What every plan reads: restart budget and backoff, the ledger's counts, held deployments, containers draining. */
export function planContextOf(p: WorkloadParts, book: DeploymentBook): PlanContext {
  return {
    now: Date.now(),
    restartBudget: p.restartPolicy.budget,
    restartBackoff: { initialMs: p.restartPolicy.backoffInitialMs, maxMs: p.restartPolicy.backoffMaxMs },
    restarts: p.ledger.spentView(),
    reported: p.ledger.reportedView(),
    held: book.held(),
    // Removed allocations' drains too: after a downgrade to `workloads` they stay their drain's to stop.
    draining: p.allocations.draining().size === 0 ? p.drainer.draining() : new Set([...p.drainer.draining(), ...p.allocations.draining()]),
  };
}

/** Containers that must take no traffic now (the static proxy leaves them out): halted, draining, or not healthy. */
export function notServingOf(p: WorkloadParts): ReadonlySet<string> {
  if (p.halting.active) return p.halting.notServing(p.health.notServing());
  const draining = [...p.drainer.draining(), ...p.allocations.notServing()];
  const unchecked = p.health.notServing();
  return draining.length === 0 ? unchecked : new Set([...unchecked, ...draining]);
}
