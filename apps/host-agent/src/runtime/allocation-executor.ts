import type { Logger } from '@tether/common';
import type { Allocation, AllocationStatus, Release } from '@tether/protocol';
import type { AllocationSet, DrainReport, ProxyTraffic } from '../controllers.js';
import { AllocationBook, mergedBindings } from './allocation-book.js';
import { disownedContainers, planAllocations, type AllocatedContainer, type AllocationPlan } from './allocation-plan.js';
import { AllocationReport } from './allocation-report.js';
import { rollAndRecord } from './allocation-rollout.js';
import { BoundedMap } from './bounded-map.js';
import type { ContainerReader } from './container-reader.js';
import { DrainBook } from './drain-book.js';
import { Drainer } from './drainer.js';
import { applyMaintenance, retire, stopAndRemove, type ContainerFailure, type ExecutorDeps } from './executor.js';
import { publishedEndpoint } from './published-port.js';
import { plan, type Action, type PlanContext } from './plan.js';

// The node's `allocations` set (capability workload.allocations) carried out
// through the deploy path's executor: planAllocations decides which container
// each allocation owns (adopting unlabelled ones, so an upgrade restarts
// nothing), which allocations roll to a new release (allocation-rollout.ts),
// and which containers leave (drained by its own drainer: a rollout's drain ends
// in `allocations.drained`, a removed allocation's is only logged). Crashed
// bound containers restart with plan()'s backoff; past the budget their
// allocation reads `failed`. See "Allocations on the agent" in architecture.md.

export type { AllocationSet } from '../controllers.js';

export interface AllocationExecutorOptions {
  /** The controller's executor dependencies; the drainer and crash report are replaced by this executor's own. */
  deps: ExecutorDeps;
  reader: ContainerReader;
  callTimeoutMs: number;
  /** TETHER_STATE_DIR/allocations.json; default: memory only. */
  allocationsFile?: string;
  /** TETHER_STATE_DIR/allocation-drains.json: drains of removed allocations; default: memory only. */
  drainsFile?: string;
  traffic: () => ProxyTraffic | undefined;
  /** The reconcile loop's restart budget, backoff and counters (and its own drains, never touched here). */
  planContext: () => PlanContext;
  /** A crash past the budget was reported (so it is reported once). */
  markReported(containerId: string): void;
  /** Asks for a pass at `at` (a held-back restart is due). */
  wake(at: number): void;
  /** A rollout's drain ended (with the allocations it moved): the agent sends `allocations.drained`. */
  rolloutDrained?(report: DrainReport & { allocationIds: string[] }): void;
  logger: Logger;
}

const ofService = (serviceId: string) => (x: { serviceId: string }) => x.serviceId === serviceId;

export class AllocationExecutor {
  readonly report: AllocationReport;
  private set: { id: string; allocations: Allocation[]; releases: Map<string, Release> } | null = null;
  /** Releases of earlier sets too: a removed allocation drains for its own release's drainSeconds. */
  private readonly known = new BoundedMap<string, Release>(1_000);
  /** Allocation id → serving container, as the last converge of its service left it. */
  private bindings = new Map<string, string>();
  private containers: AllocatedContainer[] = [];
  /** Services a new set touched and no converge has run for since. */
  private readonly stale = new Set<string>();
  private readonly book: AllocationBook;
  private readonly drains: DrainBook;
  /**
   * Containers no allocation owns, from the converge that found them until they are gone: out of the answers at
   * once (a node back from a partition serves no copy its set no longer holds), whatever their drain.
   */
  private readonly leaving = new Set<string>();
  /** Running containers whose allocation the last set does not hold (disown()): out of the answers until they are gone. */
  private disowned = new Set<string>();
  private readonly drainer: Drainer;
  private readonly deps: ExecutorDeps;
  /**
   * The agent heard no panel for TETHER_FENCE_AFTER_MS (capability workload.fence): allocations of fenced releases
   * and fenced containers are out of every plan (the controller's fence stops those), until a fresh set lifts it.
   */
  fenced = false;

  constructor(private readonly options: AllocationExecutorOptions) {
    const { logger } = options;
    this.book = new AllocationBook(options.allocationsFile ? { file: options.allocationsFile, logger } : undefined);
    this.drains = new DrainBook(options.drainsFile ? { file: options.drainsFile, logger } : undefined);
    this.drainer = new Drainer({
      book: this.drains,
      traffic: options.traffic,
      retire: async (container) => {
        await stopAndRemove(this.deps, container);
        this.left(container.id);
      },
      report: (r) => (r.allocationIds ? options.rolloutDrained?.({ ...r, allocationIds: r.allocationIds }) : logger.info({ ...r }, 'drain of a removed allocation ended')),
      logger,
    });
    this.deps = { ...options.deps, drainer: this.drainer, failed: (failure) => void this.crashed(failure) };
    this.report = new AllocationReport(() =>
      this.set
        ? {
            allocations: this.set.allocations,
            containers: this.containers,
            bindings: this.bindings,
            failure: (allocationId, deploymentId) => this.book.failure(allocationId, deploymentId),
            health: (c) => this.deps.health.view(c.id)?.verdict ?? c.health,
            ...(this.deps.privateAddress ? { endpoint: (c: AllocatedContainer) => this.endpointOf(c, this.deps.privateAddress!) } : {}),
          }
        : null,
    );
  }

  /** A set arrived since this agent started (and no `workloads` replaced it): it is the node's whole intent. */
  get active(): boolean {
    return this.set !== null;
  }

  async start(): Promise<void> {
    await this.book.load();
    for (const record of await this.drains.load()) this.drainer.follow(record);
  }

  stop(): Promise<void> {
    return this.drainer.stop();
  }

  apply(set: AllocationSet): void {
    const releases = new Map(set.releases.map((r) => [r.deploymentId, r]));
    for (const r of set.releases) this.known.set(r.deploymentId, r);
    for (const x of [...(this.set?.allocations ?? []), ...set.allocations, ...this.containers]) this.stale.add(x.serviceId);
    this.set = { id: set.id, allocations: [...set.allocations], releases };
    this.disown();
    this.report.update(true);
  }

  /**
   * Containers whose allocation the set no longer holds leave the answers now, not at their service's converge (a
   * pass and its Docker reads later): a node back from a partition after its replicas were re-placed serves none
   * of those copies from the set's arrival on (the replacement wins). Their drain and stop are the converge's.
   */
  private disown(): void {
    const disowned = disownedContainers(this.containers, this.bindings, this.set?.allocations ?? []);
    const before = this.disowned;
    this.disowned = disowned;
    if ([...disowned].some((id) => !before.has(id))) {
      void this.options.traffic()?.switchAnswers().catch((err: unknown) => this.options.logger.warn({ err }, 'answers not switched at once; the periodic refresh retries'));
    }
  }

  /** A `workloads` set (a panel without the capability) replaced the allocations: the reconcile loop owns the node again. */
  deactivate(): void {
    this.set = null;
  }

  /** Containers of removed allocations being drained: out of the answers, removed only by their drain. */
  draining(): ReadonlySet<string> {
    return this.drainer.draining();
  }

  /** What the answers leave out for the allocations: the drains, and containers no allocation owns from the set's arrival until they are gone. */
  notServing(): ReadonlySet<string> {
    const drained = this.drainer.draining();
    return this.leaving.size + this.disowned.size === 0 ? drained : new Set([...drained, ...this.leaving, ...this.disowned]);
  }

  /** The release a container runs when the set names it (its health check is the release's). */
  releaseOf(c: { serviceId: string; deploymentId: string }): Release | undefined {
    const release = this.set?.releases.get(c.deploymentId);
    return release?.serviceId === c.serviceId ? release : undefined;
  }

  status(): AllocationStatus[] | null {
    return this.report.snapshot();
  }

  /** Fresh containers of the node (a pass, a heartbeat): the status follows them. */
  refresh(actual: readonly AllocatedContainer[]): void {
    this.containers = [...actual];
    this.report.update();
  }

  /** The services a pass must converge: touched by a set, or with a rollout, a removal, a restart or an adoption to make. */
  servicesWithWork(actual: readonly AllocatedContainer[]): string[] {
    this.refresh(actual);
    if (!this.set) return [];
    const services = new Set([...this.stale, ...this.set.allocations.map((a) => a.serviceId), ...actual.map((c) => c.serviceId)]);
    return [...services].sort().filter((serviceId) => {
      if (this.stale.has(serviceId)) return true;
      const containers = actual.filter(ofService(serviceId));
      const p = this.planFor(serviceId, containers);
      const upkeep = this.keepAlive(p, containers);
      return p.rollouts.length > 0 || p.retire.length > 0 || upkeep.some((a) => a.kind !== 'wait') || this.rebinds(serviceId, p.bindings);
    });
  }

  /** Brings one service in line with the set, inside its lane. */
  async converge(serviceId: string): Promise<void> {
    if (!this.set) return;
    this.stale.delete(serviceId);
    let containers = await this.read(serviceId);
    if (!containers) return;
    const first = this.planFor(serviceId, containers);
    await applyMaintenance(this.deps, this.keepAlive(first, containers));
    const leaving = first.retire.map((c) => this.leave(c));
    for (const rollout of first.rollouts) await rollAndRecord(this.deps, rollout, { report: this.report, book: this.book, drainer: this.drainer, logger: this.options.logger });
    await Promise.all(leaving);
    containers = (await this.read(serviceId)) ?? containers;
    const settled = this.planFor(serviceId, containers);
    await this.settle(serviceId, settled.bindings);
    await this.report.pinImages(this.deps.runtime, containers, (deploymentId) => this.known.get(deploymentId));
    this.containers = [...this.containers.filter((c) => c.serviceId !== serviceId), ...containers];
    // Rolling ends once the bindings are settled, so no report shows an allocation back on `pending` in between.
    for (const a of first.rollouts.flatMap((r) => r.allocations)) this.report.rolling.delete(a.allocationId);
    this.report.update();
  }

  private async read(serviceId: string): Promise<AllocatedContainer[] | null> {
    try {
      return (await this.options.reader.read(this.options.callTimeoutMs, serviceId)).map((r) => r.actual);
    } catch (err) {
      this.options.logger.warn({ serviceId, err }, 'reading a service\'s containers failed; its allocations wait for the next pass');
      this.stale.add(serviceId);
      return null;
    }
  }

  private planFor(serviceId: string, containers: readonly AllocatedContainer[]): AllocationPlan {
    const draining = new Set([...this.drainer.draining(), ...(this.options.planContext().draining ?? [])]);
    const releases = this.set?.releases ?? new Map<string, Release>();
    const fenced = (a: Allocation) => this.fenced && releases.get(a.deploymentId)?.fence === true;
    return planAllocations({
      allocations: this.set?.allocations.filter((a) => a.serviceId === serviceId && !fenced(a)) ?? [],
      releases,
      containers: this.fenced ? containers.filter((c) => !c.fenced) : containers,
      bindings: this.book.boundView(),
      failed: this.book.failedView(),
      draining,
    });
  }

  /** The reconcile loop's keep-alive (start, restart after backoff, report past the budget) for every serving container no rollout replaces. */
  private keepAlive(p: AllocationPlan, containers: readonly AllocatedContainer[]): Action[] {
    const replaced = new Set(p.rollouts.flatMap((r) => r.allocations.map((a) => a.retire?.id)));
    const serving = new Set(p.bindings.values());
    const actions = plan(null, containers.filter((c) => serving.has(c.id) && !replaced.has(c.id)), this.options.planContext());
    for (const a of actions) if (a.kind === 'wait') this.options.wake(a.until);
    return actions;
  }

  private rebinds(serviceId: string, bindings: ReadonlyMap<string, string>): boolean {
    return (this.set?.allocations.filter(ofService(serviceId)) ?? []).some((a) => bindings.get(a.allocationId) !== this.bindings.get(a.allocationId));
  }

  /** A container no allocation owns: out of the answers, drained for its release's drainSeconds (when it has any), stopped, removed. */
  private async leave(c: AllocatedContainer): Promise<void> {
    const allocationId = c.allocationId ?? [...this.bindings].find(([, id]) => id === c.id)?.[0];
    const removed = allocationId !== undefined && !this.set?.allocations.some((a) => a.allocationId === allocationId);
    if (removed) this.report.draining.set(c.id, { allocationId, container: c });
    this.report.update();
    const release = this.known.get(c.deploymentId);
    this.leaving.add(c.id);
    try {
      await this.options.traffic()?.switchAnswers().catch((err: unknown) => this.options.logger.warn({ container: c.name, err }, 'answers not switched at once; the periodic refresh retries'));
      if (release?.drainSeconds !== undefined) {
        const record = await this.drainer.switchAway({ ...release, replicas: 1 }, [c], release.drainSeconds);
        this.drainer.follow(record);
        return;
      }
      await retire(this.deps, c);
    } catch (err) {
      this.options.logger.warn({ container: c.name, err }, 'removing a container no allocation owns failed; the next pass retries');
    }
    this.left(c.id);
  }

  private left(containerId: string): void {
    this.leaving.delete(containerId);
    this.disowned.delete(containerId);
    if (this.report.draining.delete(containerId)) this.report.update();
  }

  /** A serving container crashed past its restart budget: its allocation reads `failed` (no deploy.result: that answers a deploy). */
  private async crashed(failure: ContainerFailure): Promise<void> {
    this.options.markReported(failure.containerId);
    const c = this.containers.find((x) => x.id === failure.containerId);
    const allocationId = c?.allocationId ?? [...this.bindings].find(([, id]) => id === failure.containerId)?.[0];
    this.options.logger.error({ ...failure, allocationId }, 'allocation container crashed past its restart budget');
    if (!allocationId) return;
    await this.book.recordFailure({ allocationId, deploymentId: failure.deploymentId, code: failure.code, reason: failure.reason, at: Date.now() });
    this.report.update();
  }

  /** The service's allocations as this converge left them; the book keeps adoptions (and forgets failures the set moved past). */
  private async settle(serviceId: string, bindings: ReadonlyMap<string, string>): Promise<void> {
    const set = this.set;
    if (!set) return;
    const merged = mergedBindings(this.book.boundView(), set.allocations, serviceId, bindings);
    this.bindings = merged;
    await this.book.settle(merged, new Map(set.allocations.map((a) => [a.allocationId, a.deploymentId])));
  }

  /** Where the container publishes its release's port on the private address; null for one made without it (adopted, older agent). */
  private endpointOf(c: AllocatedContainer, privateAddress: string): string | null {
    const port = this.known.get(c.deploymentId)?.port;
    return port ? publishedEndpoint(c.ports, privateAddress, port) : null;
  }
}
