import { createLoop, KeyedSerialQueue, type Loop } from '@tether/common';
import type { AllocationStatus, Workload } from '@tether/protocol';
import type { DeployOutcome, DrainStats, Observation, VolumeSnapshot, WorkloadController, WorkloadReport } from '../controllers.js';
import type { AllocationSet } from './allocation-executor.js';
import { toContainerState, type ReadContainer } from './container-reader.js';
import { DeploymentBook, failure, outcomeOf } from './deployment-book.js';
import { RUNTIME_ERROR_CODES } from './errors.js';
import { applyMaintenance, type RolloutAction } from './executor.js';
import { DeployIntake } from './deploy-intake.js';
import { plan, type Action } from './plan.js';
import { notServingOf, planContextOf, startParts, stopParts, workloadParts, type DockerWorkloadControllerOptions, type WorkloadParts } from './workload-parts.js';

export type { DockerWorkloadControllerOptions } from './workload-parts.js';

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
  /** The parts beside the loop (workload-parts.ts): reading, health checks, drains, allocations, halt, volumes, … */
  private readonly p: WorkloadParts;
  private readonly sweep: Loop;
  private readonly lanes = new KeyedSerialQueue();
  /** Desired workloads by service id; `desiredKnown` turns true with the panel's first complete set. */
  private readonly desired = new Map<string, Workload>();
  private desiredKnown = false;
  private readonly book = new DeploymentBook();
  /** `deploy` frames: joined, answered again, made desired, their image pinned (deploy-intake.ts). */
  private readonly intake: DeployIntake;
  /** Services a pass found work for while their lane was busy. */
  private readonly skipped = new Set<string>();
  private dirty = false;
  private stopped = true;
  private wake: { at: number; timer: NodeJS.Timeout } | undefined;

  constructor(private readonly options: DockerWorkloadControllerOptions) {
    const parts = workloadParts(options, {
      reconcile: () => void this.reconcile(),
      planContext: () => planContextOf(this.p, this.book),
      wake: (at) => this.scheduleWake(at),
      wanted: (serviceId) => this.desired.has(serviceId),
      stopped: () => this.stopped,
      enqueue: (serviceId, work) => this.enqueue(serviceId, work),
    });
    this.p = parts;
    this.intake = new DeployIntake({
      runtime: options.runtime,
      book: this.book,
      desired: this.desired,
      timing: parts.timing,
      deps: parts.deps,
      drainer: parts.drainer,
      refusal: () =>
        this.stopped
          ? failure(RUNTIME_ERROR_CODES.RUNTIME_UNAVAILABLE, 'the agent runtime is stopped')
          : this.p.halting.active
            ? failure(RUNTIME_ERROR_CODES.RUNTIME_UNAVAILABLE, 'the node is decommissioned: it runs nothing')
            : null,
      converge: (serviceId, id) => this.enqueue(serviceId, () => this.converge(serviceId, id)),
    });
    this.capabilities = parts.capabilities;
    this.privateAddress = parts.privateAddress;
    this.sweep = createLoop({
      name: `runtime-sweep:${options.node}`,
      intervalMs: this.p.timing.sweepIntervalMs,
      jitterRatio: 0.1,
      run: async () => {
        do {
          this.dirty = false;
          await this.pass();
        } while (this.dirty && !this.stopped);
      },
      onError: (err) => this.p.logger.error({ err }, 'reconcile pass failed'),
    });
  }

  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    await startParts(this.p);
    this.sweep.start();
    await this.reconcile();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await stopParts(this.p);
    if (this.wake) clearTimeout(this.wake.timer);
    this.wake = undefined;
    await this.sweep.stop();
    await this.lanes.idle();
  }

  async observe(): Promise<Observation> {
    try {
      const rows = await this.p.reader.read(this.p.timing.observeTimeoutMs);
      this.available();
      this.p.health.trackRunning(rows, (actual) => (this.p.allocations.active ? this.p.allocations.releaseOf(actual) : this.desired.get(actual.serviceId)), this.options.network);
      if (this.p.allocations.active) this.p.allocations.refresh(rows.map((r) => r.actual));
      return { containers: rows.map((r) => this.p.health.withCheck(toContainerState(r, this.p.ledger.total(r.actual.id)))), runtime: this.p.availability.current };
    } catch (err) {
      // Unknown is not running: with the daemon unreachable no container is reported at all.
      this.p.availability.down(err);
      return { containers: [], runtime: this.p.availability.current };
    }
  }

  /**
   * The node is decommissioned or lost: from now on nothing starts, and every Tether container leaves the proxy's
   * answers and stops (no drain: its replacement runs elsewhere). Resolves after the first such pass.
   */
  halt(): Promise<void> {
    this.p.halting.begin();
    this.desired.clear();
    this.desiredKnown = false;
    this.p.allocations.deactivate();
    return this.reconcile();
  }

  /** A panel welcomed the node again: the first set it sends (every session open brings one) ends the halt. */
  resume(): void {
    this.p.halting.resume();
  }

  /** Checked containers that must take no traffic now (the static proxy leaves them out of its answers). */
  notServing(): ReadonlySet<string> {
    return notServingOf(this.p);
  }

  /** Drains that ended in this run and the connections they cut (agent metrics). */
  drainStats(): DrainStats {
    return { ...this.p.drainer.stats };
  }

  setDesired(workloads: Workload[]): void {
    // A panel without workload.allocations: the replica slots are the node's intent again.
    this.p.halting.released();
    if (this.p.halting.active) return;
    this.p.allocations.deactivate();
    this.desired.clear();
    for (const w of workloads) this.desired.set(w.serviceId, w);
    this.desiredKnown = true;
    void this.reconcile();
  }

  /** The node's complete allocations set: from now on its only intent (allocation-executor.ts); plan() leaves every service to it. */
  setAllocations(set: AllocationSet): void {
    this.p.halting.released();
    if (this.p.halting.active) return;
    this.desired.clear();
    this.desiredKnown = false;
    this.p.allocations.apply(set);
    void this.reconcile();
  }

  allocationStatus(): AllocationStatus[] | null {
    return this.p.allocations.status();
  }

  /** Capability workload.fence: stops fenced containers and keeps them stopped until lifted (fenced-stops.ts). */
  setFenced(fenced: boolean): void {
    if (this.p.fencedStops.set(fenced)) void this.reconcile();
  }

  onReport(listener: (report: WorkloadReport) => void): () => void {
    return this.p.reports.listen(listener);
  }

  onAllocationStatus(listener: () => void): () => void {
    return this.p.allocations.report.listen(listener);
  }

  deploy(workload: Workload): Promise<DeployOutcome> {
    return this.intake.deploy(workload);
  }

  /** The node's volumes for `volumes.report` (capability volumes.inventory); null before the first scan. */
  volumeSnapshot(): VolumeSnapshot | null {
    return this.p.inventory?.current() ?? null;
  }

  removeVolumes(serviceId: string, names?: readonly string[]): Promise<void> {
    // The whole service's volumes: not run any more (a later set agrees), so nothing recreates its containers
    // or mounts the volumes again. Single volumes (a kept one) belong to a service that no longer runs here.
    if (!names) this.desired.delete(serviceId);
    return this.p.volumeRemoval.request(serviceId, names);
  }

  /** Asks for a reconcile pass; passes never overlap and a request during one causes one more. */
  private reconcile(): Promise<void> {
    this.dirty = true;
    return this.sweep.trigger();
  }

  private available(): void {
    // The daemon is back (restarted, thawed): whatever happened meanwhile went unseen.
    if (this.p.availability.up() && !this.stopped) void this.reconcile();
  }

  private enqueue(serviceId: string, work: () => Promise<void>): void {
    void this.lanes
      .run(serviceId, work)
      .catch((err: unknown) => this.p.logger.error({ serviceId, err }, 'converge failed'))
      .finally(() => {
        if (this.skipped.delete(serviceId)) void this.reconcile();
      });
  }

  private async pass(): Promise<void> {
    if (this.stopped) return;
    let rows: ReadContainer[];
    try {
      rows = await this.p.reader.read(this.p.timing.callTimeoutMs);
      this.available();
    } catch (err) {
      this.p.availability.down(err);
      return;
    }
    if (this.p.halting.active) return this.p.halting.stopAll(rows);
    if (this.p.allocations.fenced) {
      this.p.fencedStops.stop(rows);
      rows = rows.filter((r) => !r.actual.fenced);
    }
    const now = Date.now();
    this.p.ledger.retain(new Set(rows.map((r) => r.actual.id)));
    this.p.ledger.settle(rows.filter((r) => r.actual.state === 'running').map((r) => r.actual), now, this.p.restartPolicy.resetAfterMs);
    if (this.p.allocations.active) {
      for (const serviceId of this.p.allocations.servicesWithWork(rows.map((r) => r.actual))) this.schedule(serviceId, () => this.p.allocations.converge(serviceId));
      return;
    }
    const actions = plan(this.desiredKnown ? this.desired : null, rows.map((r) => r.actual), planContextOf(this.p, this.book));
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
    if (forDeployment !== undefined && this.intake.superseded(forDeployment, workload)) return;
    let rows: ReadContainer[];
    try {
      rows = await this.p.reader.read(this.p.timing.callTimeoutMs, serviceId);
      this.available();
    } catch (err) {
      this.p.availability.down(err);
      if (forDeployment !== undefined) this.book.settle(forDeployment, outcomeOf(err), false);
      return;
    }
    const scoped = this.desiredKnown || workload ? new Map(workload ? [[serviceId, workload]] : []) : null;
    const actions = plan(scoped, rows.map((r) => r.actual), planContextOf(this.p, this.book));
    this.scheduleWaits(actions);
    await applyMaintenance(this.p.deps, actions.filter((a) => !isRollout(a)));
    const roll = actions.find(isRollout);
    if (roll) return this.intake.rollOut(roll);
    if (forDeployment !== undefined && workload) await this.intake.answer(forDeployment, workload, rows);
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
