import { backoffDelay, errorMessage, KeyedSerialQueue, sanitizeText, silentLogger, type Logger } from '@tether/common';
import { LABELS } from '../docker/docker-client.js';
import { createLoop, type Loop } from '@tether/common';
import { CAPABILITIES, type AllocationStatus, type ContainerState, type RuntimeStatus, type Workload } from '@tether/protocol';
import type { DeployOutcome, DrainReport, DrainStats, Observation, ProxyTraffic, WorkloadController, WorkloadReport } from '../controllers.js';
import type { ContainerRuntime } from './container-runtime.js';
import { AllocationExecutor, type AllocationSet } from './allocation-executor.js';
import { ContainerReader, toContainerState, type ReadContainer } from './container-reader.js';
import { DeploymentBook, failure, outcomeOf } from './deployment-book.js';
import { RUNTIME_ERROR_CODES } from './errors.js';
import { EventWatcher } from './event-watcher.js';
import { PrivateImages } from './image-access.js';
import { rolloutWithoutOverlap } from './exclusive-rollout.js';
import { DrainBook } from './drain-book.js';
import { Drainer } from './drainer.js';
import { pinImage } from './image-pin.js';
import { applyMaintenance, rollout, stopAndRemove, type ExecutorDeps, type ContainerFailure, type RolloutAction } from './executor.js';
import { plan, type Action, type PlanContext } from './plan.js';
import { waitUntilReady } from './readiness.js';
import { RestartLedger } from './restart-ledger.js';
import { HealthMonitor } from './health-monitor.js';
import { DEFAULT_RESTART_POLICY, DEFAULT_RUNTIME_TIMING, type RestartPolicy, type RuntimeTiming } from './settings.js';
import { nodeSelector } from './workload-spec.js';
import { PendingRemovals, VolumeInventory, type MeasureBudget, type PendingRemoval, type VolumeSnapshot } from '../volumes/index.js';

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

const NOT_STARTED = 'not started';

const isRollout = (a: Action): a is RolloutAction => a.kind === 'create' || a.kind === 'replace';

/**
 * WorkloadController over a container runtime: keeps this node's containers
 * where the panel wants them and reports what really runs. See "Reconcile
 * loop" in docs/architecture.md.
 */
export class DockerWorkloadController implements WorkloadController {
  /** Every optional workload field is carried out here (workload-spec.ts, exclusive-rollout.ts). */
  readonly capabilities: readonly string[];
  /** Where allocation containers publish their port (hello's privateAddress); undefined: nowhere. */
  readonly privateAddress: string | undefined;
  /** HTTP health checks of the running containers whose workload has one (health-monitor.ts). */
  private readonly health: HealthMonitor;
  private readonly timing: RuntimeTiming;
  private readonly restartPolicy: RestartPolicy;
  private readonly logger: Logger;
  private readonly reader: ContainerReader;
  private readonly watcher: EventWatcher;
  private readonly sweep: Loop;
  private readonly lanes = new KeyedSerialQueue();
  private readonly ledger: RestartLedger;
  private readonly images: PrivateImages;
  private readonly deps: ExecutorDeps;
  private readonly removals: PendingRemovals;
  private readonly inventory: VolumeInventory | undefined;
  private readonly drains: DrainBook;
  private readonly drainer: Drainer;
  /** The node's `allocations` set (capability workload.allocations); while it is active, plan() runs no service. */
  private readonly allocations: AllocationExecutor;

  /** Desired workloads by service id; `desiredKnown` turns true with the panel's first complete set. */
  private readonly desired = new Map<string, Workload>();
  private desiredKnown = false;
  private readonly book = new DeploymentBook();
  /** Services a pass found work for while their lane was busy. */
  private readonly skipped = new Set<string>();
  private dirty = false;
  private stopped = true;
  private wake: { at: number; timer: NodeJS.Timeout } | undefined;
  private status: RuntimeStatus = { available: false, error: NOT_STARTED };
  /** Fenced containers being stopped now (capability workload.fence). */
  private readonly fencing = new Set<string>();
  /**
   * The node is decommissioned or lost (decommission-guard.ts): no pass plans anything; each one takes every Tether
   * container still running out of the proxy's answers and stops it. `halted` ends with the first set after resume().
   */
  private halted = false;
  private releaseOnSet = false;
  private readonly haltedIds = new Set<string>();
  private readonly reportListeners = new Set<(report: WorkloadReport) => void>();

  constructor(private readonly options: DockerWorkloadControllerOptions) {
    this.timing = { ...DEFAULT_RUNTIME_TIMING, ...options.timing };
    this.restartPolicy = { ...DEFAULT_RESTART_POLICY, ...options.restart };
    this.logger = options.logger ?? silentLogger;
    this.reader = new ContainerReader(options.runtime, options.node);
    this.health = new HealthMonitor({ logger: this.logger });
    this.ledger = new RestartLedger(options.restartCountersFile ? { file: options.restartCountersFile, logger: this.logger } : undefined);
    this.removals = new PendingRemovals(options.pendingRemovalsFile ? { file: options.pendingRemovalsFile, logger: this.logger } : undefined);
    this.inventory = options.volumeInventory ? new VolumeInventory({ runtime: options.runtime, node: options.node, logger: this.logger, ...options.volumeInventory }) : undefined;
    this.capabilities = [
      CAPABILITIES.WORKLOAD_COMMAND,
      CAPABILITIES.WORKLOAD_RESOURCES,
      CAPABILITIES.WORKLOAD_VOLUMES,
      CAPABILITIES.WORKLOAD_HEALTH_CHECK,
      CAPABILITIES.WORKLOAD_DRAIN,
      CAPABILITIES.REGISTRY_AUTH,
      CAPABILITIES.WORKLOAD_ALLOCATIONS,
      // Carried out by rollsOutWithoutOverlap in both rollouts (plan.ts, allocation-rollout.ts).
      CAPABILITIES.WORKLOAD_STOP_FIRST,
      // workload.fence is announced by the session (handshake.ts) with the fence's timing, over setFenced below.
      ...(this.inventory ? [CAPABILITIES.VOLUMES_INVENTORY] : []),
    ];
    this.privateAddress = options.privateAddress ?? undefined;
    this.images = new PrivateImages(options.privateImagesFile ? { file: options.privateImagesFile, logger: this.logger } : undefined);
    this.drains = new DrainBook(options.drainsFile ? { file: options.drainsFile, logger: this.logger } : undefined);
    this.drainer = new Drainer({
      book: this.drains,
      traffic: () => options.traffic?.(),
      retire: (container) => stopAndRemove(this.deps, container),
      report: (drain) => {
        options.onDrained?.(drain);
        this.report({ kind: 'drained', drain });
      },
      logger: this.logger,
    });
    this.deps = {
      drainer: this.drainer,
      runtime: options.runtime,
      images: this.images,
      node: options.node,
      network: options.network,
      privateAddress: this.privateAddress ?? null,
      timing: this.timing,
      logger: this.logger,
      health: this.health,
      touched: (id) => this.reader.invalidate(id),
      restarted: (id) => this.ledger.recordRestart(id),
      failed: (failure) => {
        this.ledger.markReported(failure.containerId);
        this.logger.error({ ...failure }, 'container crashed past its restart budget');
        options.onFailure?.(failure);
        this.report({ kind: 'failed', deploymentId: failure.deploymentId, code: failure.code, reason: failure.reason });
      },
    };
    this.allocations = new AllocationExecutor({
      deps: this.deps,
      reader: this.reader,
      callTimeoutMs: this.timing.callTimeoutMs,
      ...(options.allocationsFile ? { allocationsFile: options.allocationsFile } : {}),
      ...(options.allocationDrainsFile ? { drainsFile: options.allocationDrainsFile } : {}),
      traffic: () => options.traffic?.(),
      planContext: () => this.planContext(),
      markReported: (id) => this.ledger.markReported(id),
      wake: (at) => this.scheduleWake(at),
      logger: this.logger,
    });
    this.watcher = new EventWatcher({
      runtime: options.runtime,
      labels: nodeSelector(options.node),
      reconnect: { initialMs: this.timing.eventReconnectMinMs, maxMs: this.timing.eventReconnectMaxMs },
      logger: this.logger,
      onEvent: (event) => {
        this.reader.invalidate(event.containerId);
        void this.reconcile();
      },
      onState: (open) => {
        this.reader.setTrusted(open);
        if (!open) return;
        void this.reconcile();
        options.onRuntimeReconnect?.();
      },
    });
    this.sweep = createLoop({
      name: `runtime-sweep:${options.node}`,
      intervalMs: this.timing.sweepIntervalMs,
      jitterRatio: 0.1,
      run: async () => {
        do {
          this.dirty = false;
          await this.pass();
        } while (this.dirty && !this.stopped);
      },
      onError: (err) => this.logger.error({ err }, 'reconcile pass failed'),
    });
  }

  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    await this.ledger.load();
    // Removals an earlier run ACKed and did not finish: the panel was told they were taken.
    for (const removal of await this.removals.load()) {
      this.logger.info({ ...removal }, 'resuming a volume removal from before the restart');
      this.enqueue(removal.serviceId, () => this.purgeVolumes(removal, 0));
    }
    this.inventory?.start();
    await this.images.load();
    // Drains an earlier run left: their containers stay out of the answers and stop at their deadline.
    for (const record of await this.drains.load()) {
      this.logger.info({ deploymentId: record.deploymentId, deadline: new Date(record.deadline).toISOString() }, 'resuming a drain from before the restart');
      this.drainer.follow(record);
    }
    await this.allocations.start();
    this.watcher.start();
    this.sweep.start();
    await this.reconcile();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.inventory?.stop();
    this.watcher.stop();
    this.health.stop();
    await this.drainer.stop();
    await this.allocations.stop();
    if (this.wake) clearTimeout(this.wake.timer);
    this.wake = undefined;
    await this.sweep.stop();
    await this.lanes.idle();
  }

  async observe(): Promise<Observation> {
    try {
      const rows = await this.reader.read(this.timing.observeTimeoutMs);
      this.available();
      this.checkRunning(rows);
      if (this.allocations.active) this.allocations.refresh(rows.map((r) => r.actual));
      return { containers: rows.map((r) => this.withCheck(toContainerState(r, this.ledger.total(r.actual.id)))), runtime: { ...this.status } };
    } catch (err) {
      // Unknown is not running: with the daemon unreachable no container is reported at all.
      this.unavailable(err);
      return { containers: [], runtime: { ...this.status } };
    }
  }

  /**
   * The node is decommissioned or lost: from now on nothing starts, and every Tether container leaves the proxy's
   * answers and stops (no drain: its replacement runs elsewhere). Resolves after the first such pass.
   */
  halt(): Promise<void> {
    this.halted = true;
    this.releaseOnSet = false;
    this.desired.clear();
    this.desiredKnown = false;
    this.allocations.deactivate();
    return this.reconcile();
  }

  /** A panel welcomed the node again: the first set it sends (every session open brings one) ends the halt. */
  resume(): void {
    if (this.halted) this.releaseOnSet = true;
  }

  /** A set from a panel: after resume() it ends the halt. */
  private released(): void {
    if (!this.releaseOnSet) return;
    this.halted = false;
    this.releaseOnSet = false;
    this.haltedIds.clear();
  }

  /** A halted pass: whatever still runs leaves the answers first, then stops. */
  private async stopAll(rows: ReadContainer[]): Promise<void> {
    const live = rows.filter((r) => r.actual.state === 'running' || r.actual.state === 'restarting' || r.actual.state === 'paused');
    if (live.length === 0) return;
    for (const r of live) this.haltedIds.add(r.actual.id);
    try {
      await this.options.traffic?.()?.switchAnswers();
    } catch (err) {
      this.logger.warn({ err }, 'the proxy did not confirm the stopped containers left its answers; stopping them all the same');
    }
    for (const r of live) {
      try {
        await this.options.runtime.stop(r.actual.id, this.timing.stopTimeoutMs);
      } catch (err) {
        this.logger.warn({ container: r.actual.name, err }, 'stopping a container of a decommissioned node failed; the next pass retries');
      }
      this.reader.invalidate(r.actual.id);
    }
    this.logger.info({ containers: live.map((r) => r.actual.name) }, 'containers of a decommissioned node stopped');
  }

  /** Checked containers that must take no traffic now (the static proxy leaves them out of its answers). */
  notServing(): ReadonlySet<string> {
    if (this.halted) return new Set([...this.haltedIds, ...this.health.notServing()]);
    const draining = [...this.drainer.draining(), ...this.allocations.notServing()];
    const unchecked = this.health.notServing();
    return draining.length === 0 ? unchecked : new Set([...unchecked, ...draining]);
  }

  /** Drains that ended in this run and the connections they cut (agent metrics). */
  drainStats(): DrainStats {
    return { ...this.drainer.stats };
  }

  /** The running containers of the desired deployment of a workload with a health check are checked; no other. */
  private checkRunning(rows: ReadContainer[]): void {
    const keep = new Set<string>();
    for (const { actual, details } of rows) {
      const workload = this.allocations.active ? this.allocations.releaseOf(actual) : this.desired.get(actual.serviceId);
      const check = workload?.healthCheck;
      if (!check || actual.state !== 'running' || workload.deploymentId !== actual.deploymentId) continue;
      keep.add(actual.id);
      this.health.track(actual.id, { serviceId: actual.serviceId, check, host: details.ipAddresses?.[this.options.network] ?? null, startedAt: details.startedAt });
    }
    this.health.retain(keep);
  }

  /** A checked container's health is its HTTP check's verdict, with the last probe as evidence. */
  private withCheck(state: ContainerState): ContainerState {
    const view = this.health.view(state.containerId);
    if (!view) return state;
    return { ...state, health: view.verdict, ...(view.lastProbe ? { lastProbe: view.lastProbe } : {}) };
  }

  setDesired(workloads: Workload[]): void {
    // A panel without workload.allocations: the replica slots are the node's intent again.
    this.released();
    if (this.halted) return;
    this.allocations.deactivate();
    this.desired.clear();
    for (const w of workloads) this.desired.set(w.serviceId, w);
    this.desiredKnown = true;
    void this.reconcile();
  }

  /** The node's complete allocations set: from now on its only intent (allocation-executor.ts); plan() leaves every service to it. */
  setAllocations(set: AllocationSet): void {
    this.released();
    if (this.halted) return;
    this.desired.clear();
    this.desiredKnown = false;
    this.allocations.apply(set);
    void this.reconcile();
  }

  allocationStatus(): AllocationStatus[] | null {
    return this.allocations.status();
  }

  /**
   * Capability workload.fence: true once no panel was heard for TETHER_FENCE_AFTER_MS, false when a set a fresh
   * session brought lifts it. Fenced, every container of a fenced release is stopped (SIGTERM, TETHER_STOP_TIMEOUT_MS,
   * SIGKILL) and removed at once, outside the service lanes (a rollout in one never holds the fence back), and no
   * plan starts one again: passes stop any that shows up, and planFor leaves fenced allocations out.
   */
  setFenced(fenced: boolean): void {
    if (this.allocations.fenced === fenced) return;
    this.allocations.fenced = fenced;
    this.logger.warn({ fenced }, fenced ? 'no panel heard for the fence deadline: stopping fenced containers' : 'a fresh set after the fence: fenced containers may run again');
    if (fenced) {
      void this.reader.read(this.timing.callTimeoutMs).then(
        (rows) => this.stopFenced(rows),
        (err: unknown) => this.logger.warn({ err }, 'reading containers for the fence failed; the next pass stops them'),
      );
    }
    void this.reconcile();
  }

  /** While fenced: stops and removes every fenced container not already being stopped. */
  private stopFenced(rows: readonly ReadContainer[]): void {
    if (!this.allocations.fenced) return;
    for (const { actual } of rows) {
      if (!actual.fenced || this.fencing.has(actual.id)) continue;
      this.fencing.add(actual.id);
      void stopAndRemove(this.deps, actual)
        .then(
          () => this.logger.warn({ container: actual.name, allocationId: actual.allocationId }, 'fenced container stopped and removed'),
          (err: unknown) => this.logger.warn({ container: actual.name, err }, 'stopping a fenced container failed; the next pass retries'),
        )
        .finally(() => this.fencing.delete(actual.id));
    }
  }

  onReport(listener: (report: WorkloadReport) => void): () => void {
    this.reportListeners.add(listener);
    return () => this.reportListeners.delete(listener);
  }

  private report(report: WorkloadReport): void {
    for (const listener of this.reportListeners) listener(report);
  }

  onAllocationStatus(listener: () => void): () => void {
    return this.allocations.report.listen(listener);
  }

  deploy(workload: Workload): Promise<DeployOutcome> {
    const id = workload.deploymentId;
    // Every answer for a running deployment names the image as it ran (a redelivery's too).
    const pinned = async (outcome: DeployOutcome): Promise<DeployOutcome> => {
      if (outcome.status !== 'running' || outcome.imageRef) return outcome;
      const imageRef = await pinImage(this.options.runtime, workload.image);
      return imageRef ? { ...outcome, imageRef } : outcome;
    };
    const existing = this.book.existing(id);
    if (existing) return existing.then(pinned);
    if (this.stopped) return Promise.resolve(failure(RUNTIME_ERROR_CODES.RUNTIME_UNAVAILABLE, 'the agent runtime is stopped'));
    if (this.halted) return Promise.resolve(failure(RUNTIME_ERROR_CODES.RUNTIME_UNAVAILABLE, 'the node is decommissioned: it runs nothing'));
    const previous = this.desired.get(workload.serviceId);
    this.desired.set(workload.serviceId, workload);
    const answer = this.book.track(id);
    this.enqueue(workload.serviceId, () => this.converge(workload.serviceId, id));
    return answer.then(async (outcome) => {
      if (outcome.status === 'running') return pinned(outcome);
      // A deployment answered "failed" must not come true later on its own (say, when the daemon is back):
      // the node goes back to what it was asked before, unless something newer arrived meanwhile.
      if (outcome.status === 'failed' && this.desired.get(workload.serviceId) === workload) {
        if (previous) this.desired.set(workload.serviceId, previous);
        else this.desired.delete(workload.serviceId);
      }
      return outcome;
    });
  }

  /** The node's volumes for `volumes.report` (capability volumes.inventory); null before the first scan. */
  volumeSnapshot(): VolumeSnapshot | null {
    return this.inventory?.current() ?? null;
  }

  async removeVolumes(serviceId: string, names?: readonly string[]): Promise<void> {
    const removal: PendingRemoval = { serviceId, names: names ? [...names] : null };
    // The whole service's volumes: not run any more (a later set agrees), so nothing recreates its containers
    // or mounts the volumes again. Single volumes (a kept one) belong to a service that no longer runs here.
    if (removal.names === null) this.desired.delete(serviceId);
    await this.removals.add(removal);
    this.enqueue(serviceId, () => this.purgeVolumes(removal, 0));
  }

  /** The service's containers, then its volumes; retried with backoff while the agent runs (Docker may be away). */
  private async purgeVolumes(removal: PendingRemoval, attempt: number): Promise<void> {
    if (this.stopped) return;
    const { serviceId, names } = removal;
    if (this.desired.has(serviceId)) {
      // Deployed here again since (the panel refuses a kept volume's delete while its service is on the node).
      this.logger.warn({ ...removal }, 'volume removal dropped: the service runs on this node again');
      await this.removals.done(removal);
      return;
    }
    const { runtime, node } = this.options;
    try {
      for (const r of await this.reader.read(this.timing.callTimeoutMs, serviceId)) {
        await runtime.remove(r.actual.id);
        this.reader.invalidate(r.actual.id);
      }
      const volumes = (await runtime.listVolumes({ [LABELS.node]: node, [LABELS.service]: serviceId })).filter(
        (v) => names === null || names.includes(v.labels[LABELS.volume] ?? ''),
      );
      for (const v of volumes) await runtime.removeVolume(v.name);
      this.logger.info({ serviceId, volumes: volumes.map((v) => v.name) }, 'removed a deleted service\'s volumes');
      await this.removals.done(removal);
      void this.inventory?.rescan();
    } catch (err) {
      const delayMs = backoffDelay(attempt, { initialMs: this.timing.eventReconnectMinMs, maxMs: 30_000, jitter: 0 });
      this.logger.warn({ serviceId, err, retryInMs: delayMs }, 'removing a deleted service\'s volumes failed; retrying');
      const timer = setTimeout(() => this.enqueue(serviceId, () => this.purgeVolumes(removal, attempt + 1)), delayMs);
      timer.unref();
    }
  }

  /** Asks for a reconcile pass; passes never overlap and a request during one causes one more. */
  private reconcile(): Promise<void> {
    this.dirty = true;
    return this.sweep.trigger();
  }

  private available(): void {
    const wasDown = !this.status.available;
    this.status = { available: true, error: null };
    if (!wasDown) return;
    this.logger.info({ node: this.options.node }, 'docker runtime available');
    // The daemon is back (restarted, thawed): whatever happened meanwhile went unseen.
    if (!this.stopped) void this.reconcile();
  }

  private unavailable(err: unknown): void {
    const error = sanitizeText(errorMessage(err), { maxLength: 1000 });
    // Said once per outage, so an operator sees at start (and whenever it goes) why nothing runs.
    if (this.status.available || this.status.error === NOT_STARTED) this.logger.warn({ err }, 'docker runtime unavailable; reporting no containers until it answers');
    this.status = { available: false, error };
  }

  private planContext(): PlanContext {
    return {
      now: Date.now(),
      restartBudget: this.restartPolicy.budget,
      restartBackoff: { initialMs: this.restartPolicy.backoffInitialMs, maxMs: this.restartPolicy.backoffMaxMs },
      restarts: this.ledger.spentView(),
      reported: this.ledger.reportedView(),
      held: this.book.held(),
      // Removed allocations' drains too: after a downgrade to `workloads` they stay their drain's to stop.
      draining: this.allocations.draining().size === 0 ? this.drainer.draining() : new Set([...this.drainer.draining(), ...this.allocations.draining()]),
    };
  }

  private enqueue(serviceId: string, work: () => Promise<void>): void {
    void this.lanes
      .run(serviceId, work)
      .catch((err: unknown) => this.logger.error({ serviceId, err }, 'converge failed'))
      .finally(() => {
        if (this.skipped.delete(serviceId)) void this.reconcile();
      });
  }

  private async pass(): Promise<void> {
    if (this.stopped) return;
    let rows: ReadContainer[];
    try {
      rows = await this.reader.read(this.timing.callTimeoutMs);
      this.available();
    } catch (err) {
      this.unavailable(err);
      return;
    }
    if (this.halted) return this.stopAll(rows);
    if (this.allocations.fenced) {
      this.stopFenced(rows);
      rows = rows.filter((r) => !r.actual.fenced);
    }
    const now = Date.now();
    this.ledger.retain(new Set(rows.map((r) => r.actual.id)));
    this.ledger.settle(rows.filter((r) => r.actual.state === 'running').map((r) => r.actual), now, this.restartPolicy.resetAfterMs);
    if (this.allocations.active) {
      for (const serviceId of this.allocations.servicesWithWork(rows.map((r) => r.actual))) this.schedule(serviceId, () => this.allocations.converge(serviceId));
      return;
    }
    const actions = plan(this.desiredKnown ? this.desired : null, rows.map((r) => r.actual), this.planContext());
    this.scheduleWaits(actions);
    const services = new Set<string>();
    for (const a of actions) {
      if (a.kind === 'wait') continue;
      const retryAt = isRollout(a) ? this.book.retryAt(a.workload.deploymentId) : undefined;
      if (retryAt !== undefined && retryAt > now) {
        this.scheduleWake(retryAt);
        continue;
      }
      services.add(a.serviceId);
    }
    for (const serviceId of services) this.schedule(serviceId, () => this.converge(serviceId));
  }

  /** Work a pass found for a service: run in its lane, or once more after the work already in it. */
  private schedule(serviceId: string, work: () => Promise<void>): void {
    if (this.lanes.busy(serviceId)) this.skipped.add(serviceId);
    else this.enqueue(serviceId, work);
  }

  /**
   * Brings one service in line, inside its lane: reads its containers, plans,
   * applies. With `forDeployment`, also answers that deployment.
   */
  private async converge(serviceId: string, forDeployment?: string): Promise<void> {
    const workload = this.desired.get(serviceId);
    if (forDeployment !== undefined && workload?.deploymentId !== forDeployment) {
      // A newer deployment of the service arrived while this one waited for its lane.
      const by = workload ? `deployment ${workload.deploymentId}` : 'removal of the service';
      return this.book.settle(forDeployment, failure(RUNTIME_ERROR_CODES.SUPERSEDED, `superseded by ${by} before it started`), true);
    }
    let rows: ReadContainer[];
    try {
      rows = await this.reader.read(this.timing.callTimeoutMs, serviceId);
      this.available();
    } catch (err) {
      this.unavailable(err);
      if (forDeployment !== undefined) this.book.settle(forDeployment, outcomeOf(err), false);
      return;
    }
    const scoped = this.desiredKnown || workload ? new Map(workload ? [[serviceId, workload]] : []) : null;
    const actions = plan(scoped, rows.map((r) => r.actual), this.planContext());
    this.scheduleWaits(actions);
    await applyMaintenance(this.deps, actions.filter((a) => !isRollout(a)));
    const roll = actions.find(isRollout);
    if (roll) return this.runRollout(roll);
    if (forDeployment === undefined || !workload) return;
    const outcome = await this.answerFromContainers(workload, rows);
    this.book.settle(forDeployment, outcome, false);
    // Nothing left to drain that this run knows of (a drain under way or reported answers for itself).
    if (outcome.status === 'running' && workload.drainSeconds !== undefined && !this.drainer.knows(forDeployment)) this.drainer.reportNothing(forDeployment);
  }

  private async runRollout(action: RolloutAction): Promise<void> {
    const id = action.workload.deploymentId;
    void this.book.track(id);
    // A writable volume: never two containers of the service at once.
    const result = action.kind === 'replace' && !action.overlap ? await rolloutWithoutOverlap(this.deps, action) : await rollout(this.deps, action);
    this.book.rolledOut(id, result.outcome, result.superseded, this.timing.sweepIntervalMs);
    if (result.drain) this.drainer.follow(result.drain);
    else if (result.outcome.status === 'running' && action.workload.drainSeconds !== undefined) this.drainer.reportNothing(id);
    await result.cleanup;
  }

  /** Nothing to roll out (a redelivery, or containers adopted after an agent restart): the answer is what runs. */
  private async answerFromContainers(workload: Workload, rows: ReadContainer[]): Promise<DeployOutcome> {
    const mine = rows.filter((r) => r.actual.deploymentId === workload.deploymentId && r.actual.replica !== null && r.actual.replica < workload.replicas);
    try {
      await waitUntilReady(this.options.runtime, mine.map((r) => ({ id: r.actual.id, minReadyMs: 0 })), {
        timeoutMs: this.timing.startTimeoutMs,
        pollMs: this.timing.readinessPollMs,
        logLines: 5,
      });
    } catch (err) {
      return outcomeOf(err);
    }
    return { status: 'running', reason: `${mine.length}/${workload.replicas} replicas already running` };
  }

  private scheduleWaits(actions: Action[]): void {
    for (const a of actions) if (a.kind === 'wait') this.scheduleWake(a.until);
  }

  /** One timer for the earliest moment a held-back restart or retry becomes due. */
  private scheduleWake(at: number): void {
    if (this.stopped || (this.wake && this.wake.at <= at)) return;
    if (this.wake) clearTimeout(this.wake.timer);
    const timer = setTimeout(() => {
      this.wake = undefined;
      void this.reconcile();
    }, Math.max(0, at - Date.now()) + 5);
    timer.unref();
    this.wake = { at, timer };
  }
}
