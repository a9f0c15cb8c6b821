import { randomUUID } from 'node:crypto';
import { createLoop, type Logger, type Loop } from '@tether/common';
import type { Db } from '../db/database.js';
import { evaluate, isEmptyPlan, type AllocationRow, type EvaluationPlan, type ServiceRow } from '../scheduling/evaluation.js';
import type { FailoverSettings } from '../scheduling/failover-policy.js';
import { SchedulerLease, StaleEpochError } from './scheduler-lease.js';
import { recordFailover } from './failover-record.js';
import type { Signal, SignalKind } from './panel-signals.js';
import { FailoverTracker, type FailoverStatus } from './scheduler-failover.js';
import { readState } from './scheduler-reads.js';
import { writePlan } from './scheduler-writes.js';

// The evacuate answer reads as an evaluation reads; its callers know it by the scheduler.
export { evacuationAnswer, evacuationAnswerIn, type EvacuationAnswer } from './evacuation-answer.js';

// The scheduler of issue 36, run by one panel at a time. Every panel tries to
// take or renew the scheduler lease (scheduler-lease.ts); the holder evaluates
// every TETHER_SCHEDULER_INTERVAL_MS and whenever nudged (a service created,
// changed or deleted, a deployment created, a session opened or closed, a
// cordon, an allocation's status reported). One evaluation reads the managed
// services, the nodes (live = a session that carried traffic, on this panel or
// on another whose lease is live), the allocations and the deployments in
// flight, runs evaluate() (scheduling/evaluation.ts), and writes its plan in
// ONE transaction fenced by the epoch it holds: a panel that lost the lease
// writes nothing. Only after the commit are the nodes whose allocations
// changed told: here through `allocationsChanged`, on the other panels by an
// `allocations` signal (the panel holding the node's session sends it its
// frame). No Docker or network I/O runs inside the transaction. What it reads
// is scheduler-reads.ts, how it writes scheduler-writes.ts, its failover
// clocks scheduler-failover.ts.

export interface SchedulerSignals {
  send(kind: SignalKind, panel: string, ids: readonly string[]): Promise<void>;
  on(event: 'signal', listener: (signal: Signal) => void): unknown;
}

export interface SchedulerOptions {
  prisma: Db;
  panelId: string;
  logger: Logger;
  /** How long the scheduler lease lasts (renewed at a third). */
  leaseMs: number;
  /** The holder evaluates this often (and when nudged). */
  intervalMs: number;
  /** A rollout that makes no step for this long fails, naming the nodes it waits for. */
  progressDeadlineMs: number;
  /** Whether this panel holds a live session of the node (its connected map). */
  holdsSession: (nodeId: string) => boolean;
  /** The panels' signals (several panels on one database); absent: this panel alone. */
  signals?: SchedulerSignals;
  /**
   * These nodes' allocations changed: their sessions on this panel get their `allocations` frame again
   * (`remote`: the scheduler on another panel changed them, this one heard its signal).
   */
  allocationsChanged: (nodeIds: readonly string[], reason: string, remote: boolean) => void;
  /** Deployments this evaluation ended running (committed): their services' routes may now be on the map. */
  deploymentsRunning?: (deploymentIds: readonly string[]) => void;
  /** Tests: a lease of their own (default: one made here). */
  lease?: SchedulerLease;
  /**
   * Failover (issue 38): when an unreachable node counts lost, the brake, and the pace of re-placements
   * (TETHER_RESCHEDULE_AFTER_MS, TETHER_RESCHEDULE_MAX_UNREACHABLE, TETHER_RESCHEDULE_PER_MINUTE). Absent: nothing
   * is ever re-placed off an unreachable node.
   */
  failover?: FailoverSettings & { perMinute: number };
}

export interface EvaluationSummary {
  epoch: number;
  placed: number;
  stopped: number;
  removed: number;
  moved: number;
  deployments: EvaluationPlan['deployments'];
  changedNodes: string[];
  /** Failover at this evaluation (null without failover settings). */
  failover: FailoverStatus | null;
}

/** How soon nudges from a panel that does not hold the lease are sent on to the holder (batched). */
const NUDGE_BATCH_MS = 50;
/**
 * Nudged evaluations start at least this far apart (at most the interval): a reconnect storm's thousands of
 * session opens cost a few evaluations, not one each.
 */
const MIN_GAP_MS = 200;
/** The most a stop waits to give the lease up. */
const STOP_RELEASE_MS = 1_000;

export class Scheduler {
  readonly lease: SchedulerLease;
  readonly #loop: Loop;
  /** A nudge came while an evaluation ran: run again once it ends. */
  #again = false;
  #running = false;
  #stopped = true;
  /** When each allocation was placed on or moved to a target release (database clock, ms). */
  readonly #movedAt = new Map<string, number>();
  /** When each rollout last made a step (database clock, ms). */
  readonly #progressAt = new Map<string, number>();
  #forward: { ids: Set<string>; timer: NodeJS.Timeout } | undefined;
  /**
   * The nodes each managed service had run allocations on at the last evaluation: a service deleted since took
   * its allocations with it (ON DELETE CASCADE), and those nodes must still be told. A new holder starts empty.
   */
  #nodesByService = new Map<string, Set<string>>();
  evaluations = 0;
  readonly #failover: FailoverTracker;

  /** The last failover status (null until the first evaluation with failover settings). */
  get failover(): FailoverStatus | null {
    return this.#failover.status;
  }

  constructor(private readonly options: SchedulerOptions) {
    this.#failover = new FailoverTracker(options.failover, options.logger);
    this.lease = options.lease ?? new SchedulerLease({ prisma: options.prisma, panelId: options.panelId, leaseMs: options.leaseMs, logger: options.logger });
    this.#loop = createLoop({
      name: 'scheduler',
      intervalMs: options.intervalMs,
      run: () => this.#run(),
      onError: (err) => options.logger.warn({ err }, 'scheduler evaluation failed'),
    });
    this.lease.onChange = (held) => {
      // A new holder knows nothing of the old one's clocks: rollouts count from their start or from now.
      this.#movedAt.clear();
      this.#progressAt.clear();
      this.#nodesByService.clear();
      this.#failover.leaseChanged();
      if (held) this.nudge('scheduler lease taken');
    };
    options.signals?.on('signal', (signal) => this.#signalled(signal));
  }

  start(): void {
    this.#stopped = false;
    this.lease.start();
    this.#loop.start();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#forward) clearTimeout(this.#forward.timer);
    this.#forward = undefined;
    await this.#loop.stop();
    // Giving the lease up spares the next holder its expiry; a database that does not answer does not hold the stop.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.lease.stop(), new Promise<void>((resolve) => (timer = setTimeout(resolve, STOP_RELEASE_MS)))]);
    clearTimeout(timer);
  }

  /**
   * Evaluate soon: at once on the holder; on another panel the holder is signalled (`schedule`, batched), so a
   * change made through any panel is placed without waiting for the interval.
   */
  nudge(reason: string, nodeId?: string): void {
    if (this.#stopped) return;
    if (this.lease.held) {
      if (this.#running) this.#again = true;
      else void this.#loop.trigger();
      return;
    }
    const signals = this.options.signals;
    if (!signals) return;
    if (!this.#forward) {
      const forward = { ids: new Set<string>(), timer: setTimeout(() => this.#sendForward(), NUDGE_BATCH_MS) };
      forward.timer.unref();
      this.#forward = forward;
    }
    this.#forward.ids.add(nodeId ?? reason.replace(/[:,]/g, ' ').slice(0, 200));
  }

  /** Hook for the session side: an allocations.status of this node was stored (a rollout may go on). */
  onAllocationStatus(nodeId: string): void {
    this.nudge(`allocation status of node ${nodeId}`, nodeId);
  }

  #sendForward(): void {
    const forward = this.#forward;
    this.#forward = undefined;
    if (!forward || this.#stopped) return;
    void this.options.signals?.send('schedule', this.options.panelId, [...forward.ids]);
  }

  #signalled(signal: Signal): void {
    if (signal.panel === this.options.panelId || this.#stopped) return;
    if (signal.kind === 'schedule' && this.lease.held) this.nudge(`signalled by panel ${signal.panel}`);
    if (signal.kind === 'allocations') {
      const held = signal.ids.filter((id) => this.options.holdsSession(id));
      if (held.length > 0) this.options.allocationsChanged(held, `allocations changed by the scheduler on panel ${signal.panel}`, true);
    }
  }

  async #run(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    try {
      const gap = Math.min(MIN_GAP_MS, this.options.intervalMs);
      do {
        this.#again = false;
        if (!this.lease.held) return;
        const startedAt = performance.now();
        await this.evaluate();
        const wait = startedAt + gap - performance.now();
        if (this.#again && wait > 0) await new Promise((resolve) => setTimeout(resolve, wait).unref());
      } while (this.#again && !this.#stopped);
    } finally {
      this.#running = false;
    }
  }

  /**
   * One evaluation under the epoch this panel holds, written in one fenced transaction; null when the lease
   * is not held (or was lost before the write committed: nothing was written).
   */
  async evaluate(): Promise<EvaluationSummary | null> {
    const held = this.lease.held;
    if (!held) return null;
    this.evaluations++;
    let plan: EvaluationPlan;
    let now: number;
    let nodesByService: Map<string, Set<string>>;
    try {
      let failover: FailoverStatus | null = null;
      ({ plan, now, nodesByService, failover } = await this.lease.write(held.epoch, async (tx) => {
        const input = await readState(tx, this.options.holdsSession);
        const view = this.#failover.view(input.nodes, input.now);
        const made = evaluate({
          ...input,
          progressDeadlineMs: this.options.progressDeadlineMs,
          movedAt: this.#movedAt,
          progressAt: this.#progressAt,
          newId: () => `al_${randomUUID()}`,
          ...(view ? { failover: { states: view.states, budget: view.budget, fenceHeld: view.fenceHeld } } : {}),
        });
        if (!isEmptyPlan(made)) {
          await writePlan(tx, made, held.epoch);
          await recordFailover(tx, made, input.nodes);
        }
        return { plan: made, now: input.now, nodesByService: runNodesByService(input.services, input.allocations, made), failover: view?.status(made) ?? null };
      }));
      this.#failover.report(failover, plan, now, held.epoch);
    } catch (err) {
      if (err instanceof StaleEpochError) {
        this.options.logger.warn({ epoch: held.epoch }, 'scheduler lease lost before the evaluation committed: nothing written');
        return null;
      }
      // The scheduler's own view of a database outage: the first evaluation that commits after failures ends it.
      this.#failover.evaluationFailed();
      throw err;
    }
    this.#failover.evaluationCommitted();
    for (const id of plan.moved) this.#movedAt.set(id, now);
    for (const id of plan.progressed) this.#progressAt.set(id, now);
    for (const d of plan.deployments) if (d.kind !== 'progress') this.#progressAt.delete(d.id);
    for (const id of plan.remove) this.#movedAt.delete(id);
    for (const stop of plan.stop) this.#movedAt.delete(stop.allocationId);
    // Services gone since the last evaluation: the nodes that ran them get their (smaller) set.
    const gone = new Set<string>();
    for (const [serviceId, nodes] of this.#nodesByService) if (!nodesByService.has(serviceId)) for (const n of nodes) gone.add(n);
    this.#nodesByService = nodesByService;
    if (gone.size > 0) plan = { ...plan, changedNodes: [...new Set([...plan.changedNodes, ...gone])].sort() };
    if (plan.changedNodes.length > 0) {
      const reason = `scheduler: ${plan.insert.length} placed, ${plan.stop.length} stopped, ${plan.moves.reduce((n, m) => n + m.allocationIds.length, 0)} moved to another release`;
      const local = plan.changedNodes.filter((id) => this.options.holdsSession(id));
      if (local.length > 0) this.options.allocationsChanged(local, reason, false);
      await this.options.signals?.send('allocations', this.options.panelId, plan.changedNodes);
    }
    const ran = plan.deployments.filter((d) => d.kind === 'running').map((d) => d.id);
    if (ran.length > 0) this.options.deploymentsRunning?.(ran);
    if (plan.pending.length > 0 || plan.refused.length > 0) this.options.logger.debug({ pending: plan.pending, refused: plan.refused }, 'replicas the scheduler could not place');
    return {
      epoch: held.epoch,
      placed: plan.insert.length,
      stopped: plan.stop.length,
      removed: plan.remove.length,
      moved: plan.moves.reduce((n, m) => n + m.allocationIds.length, 0),
      deployments: plan.deployments,
      changedNodes: plan.changedNodes,
      failover: this.failover,
    };
  }
}

/** Where each service runs once the plan is written (run allocations), including services with none: an empty set. */
function runNodesByService(services: readonly ServiceRow[], allocations: readonly AllocationRow[], plan: EvaluationPlan): Map<string, Set<string>> {
  const stopped = new Set(plan.stop.map((s) => s.allocationId));
  const out = new Map<string, Set<string>>(services.map((s) => [s.id, new Set<string>()]));
  const add = (serviceId: string, nodeId: string) => {
    const set = out.get(serviceId) ?? new Set<string>();
    set.add(nodeId);
    out.set(serviceId, set);
  };
  for (const a of allocations) if (a.desired === 'run' && !stopped.has(a.id)) add(a.serviceId, a.nodeId);
  for (const row of plan.insert) add(row.serviceId, row.nodeId);
  return out;
}

