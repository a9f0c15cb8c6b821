import { randomUUID } from 'node:crypto';
import { createLoop, type Logger, type Loop } from '@tether/common';
import { CAPABILITIES, hasWritableVolume } from '@tether/protocol';
import type { Db, Tx } from '../db/database.js';
import { prismaSql } from '../db/sql.js';
import { stringRecordOf } from '../db/json-columns.js';
import { evaluate, isEmptyPlan, previewEvacuation, type AllocationRow, type DeploymentRow, type EvaluationPlan, type ServiceRow } from '../scheduling/evaluation.js';
import { LIVE_ELSEWHERE, type NodeFacts } from '../scheduling/managed.js';
import { homeJoin, managedSql } from '../db/where-services-run.js';
import type { ReportedStatus } from '../scheduling/rollout-progress.js';
import { failoverView, type Brake, type FailoverSettings } from '../scheduling/failover-policy.js';
import { SchedulerLease, StaleEpochError } from './scheduler-lease.js';
import { recordFailover } from './failover-record.js';
import type { Signal, SignalKind } from './panel-signals.js';

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
// frame). No Docker or network I/O runs inside the transaction.

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

/** What failover sees now (GET /v1/panel `scheduler.failover`), as of the holder's last evaluation. */
export interface FailoverStatus {
  /** Why nothing is re-placed now, or null. */
  brake: Brake | null;
  /** Nodes counted lost at the last evaluation (their stateless replicas re-placed). */
  lost: string[];
  /** Nodes unreachable, not (yet) lost. */
  unreachable: string[];
  /** Re-placements left for later by the pace at the last evaluation. */
  deferred: number;
  /** Lost replicas re-placed by this panel since it took the lease. */
  replaced: number;
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
  /** This panel's start on its own monotonic clock: the brake holds for one grace after it. */
  readonly #startedAt = performance.now();
  /** The end of the last database outage an evaluation saw (monotonic ms), or null. */
  #databaseBackAt: number | null = null;
  #databaseDown = false;
  /** The last evaluation that found too many nodes unreachable (monotonic ms), or null: the brake holds a grace after it. */
  #manyUnreachableAt: number | null = null;
  /** When each lost replica was re-placed (database clock, ms), for the pace per minute. */
  #replacedAt: number[] = [];
  #replaced = 0;
  /** The last failover status (null until the first evaluation with failover settings). */
  failover: FailoverStatus | null = null;

  constructor(private readonly options: SchedulerOptions) {
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
      this.#replacedAt = [];
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
        const view = this.#failoverView(input.nodes, input.now);
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
      this.#reportFailover(failover, plan, now, held.epoch);
    } catch (err) {
      if (err instanceof StaleEpochError) {
        this.options.logger.warn({ epoch: held.epoch }, 'scheduler lease lost before the evaluation committed: nothing written');
        return null;
      }
      // The scheduler's own view of a database outage: the first evaluation that commits after failures ends it.
      this.#databaseDown = true;
      throw err;
    }
    if (this.#databaseDown) {
      this.#databaseDown = false;
      this.#databaseBackAt = performance.now();
    }
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

  /** failoverView over the nodes as read now (database clock), with this panel's start and outage end on that clock. */
  #failoverView(nodes: readonly NodeFacts[], now: number) {
    const settings = this.options.failover;
    if (!settings) return null;
    const local = performance.now();
    const onDbClock = (at: number) => now - (local - at);
    const view = failoverView(
      nodes.map((n) => ({ id: n.id, name: n.name, live: n.live, decommissioned: n.decommissioned, lostByOperator: n.lost === true, downSince: n.live ? null : (n.downSince ?? null), fence: n.fence ?? null })),
      now,
      settings,
      {
        panelStartedAt: onDbClock(this.#startedAt),
        databaseBackAt: this.#databaseBackAt === null ? null : onDbClock(this.#databaseBackAt),
        manyUnreachableAt: this.#manyUnreachableAt === null ? null : onDbClock(this.#manyUnreachableAt),
      },
    );
    if (view.brake?.reason === 'TOO_MANY_UNREACHABLE') this.#manyUnreachableAt = local;
    this.#replacedAt = this.#replacedAt.filter((at) => at > now - 60_000);
    const budget = Math.max(0, settings.perMinute - this.#replacedAt.length);
    const byId = new Map(nodes.map((n) => [n.id, n]));
    return {
      states: view.states,
      fenceHeld: view.fenceHeld,
      budget,
      status: (plan: EvaluationPlan): FailoverStatus => {
        const lost: string[] = [];
        const unreachable: string[] = [];
        for (const [id, state] of view.states) {
          const n = byId.get(id);
          if (!n || n.decommissioned) continue;
          if (state === 'lost') lost.push(n.name);
          else if (state === 'unreachable') unreachable.push(n.name);
        }
        return { brake: view.brake, lost: lost.sort(), unreachable: unreachable.sort(), deferred: plan.deferred, replaced: this.#replaced };
      },
    };
  }

  /** Counts re-placements for the pace, and logs what failover did and why it held (once per change). */
  #reportFailover(status: FailoverStatus | null, plan: EvaluationPlan, now: number, epoch: number): void {
    if (!status) return;
    const replaced = plan.insert.filter((row) => row.cause === 'node-lost');
    for (let i = 0; i < replaced.length; i++) this.#replacedAt.push(now);
    this.#replaced += replaced.length;
    status.replaced = this.#replaced;
    const before = this.failover;
    this.failover = status;
    const { logger } = this.options;
    // A warning only while the brake holds something back: a brake with every node live (each panel start) is no news.
    const holding = (s: typeof status | null | undefined) => (s?.brake && s.unreachable.length > 0 ? s.brake.reason : null);
    if (holding(before) !== holding(status)) {
      // Holding back after the panel's own start is by design (its agents are still connecting): info, not a warning.
      if (status.brake && holding(status)) {
        const level = status.brake.reason === 'PANEL_STARTED' ? 'info' : 'warn';
        logger[level]({ brake: status.brake, unreachable: status.unreachable }, `failover held: ${status.brake.reason}: nothing is re-placed off unreachable nodes`);
      }
      else if (holding(before)) logger.info({ brake: before!.brake }, 'failover brake released');
    }
    const newlyLost = status.lost.filter((n) => !(before?.lost ?? []).includes(n));
    if (newlyLost.length > 0) logger.warn({ nodes: newlyLost, epoch }, `nodes lost (no live session for the reschedule grace): their stateless replicas are re-placed`);
    if (replaced.length > 0 || plan.deferred > 0) {
      logger.info({ replaced: replaced.map((r) => ({ allocation: r.id, service: r.serviceId, to: r.nodeId })), deferred: plan.deferred, epoch }, 'lost replicas re-placed');
    }
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

interface ServiceSql {
  id: string;
  node_id: string | null;
  home_name: string | null;
  pending: unknown;
  replicas: number;
  placement: unknown;
  volumes: { readOnly?: boolean }[] | null;
  routed: boolean;
  created_ms: number;
  fence: boolean;
  max_surge: number | null;
  max_unavailable: number | null;
  progress_deadline_s: number | null;
}

interface NodeSql {
  id: string;
  name: string;
  cordoned: boolean;
  evacuating: boolean;
  decommissioned: boolean;
  lost: boolean;
  labels: unknown;
  capabilities: string[] | null;
  live_elsewhere: boolean;
  down_ms: number | null;
  fence_after_ms: number | null;
  fence_stop_timeout_ms: number | null;
}

interface AllocationSql {
  id: string;
  service_id: string;
  node_id: string;
  release_id: string | null;
  desired: string;
  created_ms: number;
  status: ReportedStatus | null;
  status_ms: number | null;
}

interface DeploymentSql {
  id: string;
  service_id: string;
  status: DeploymentRow['status'];
  created_ms: number;
  dispatched_ms: number | null;
  reason: string | null;
}

/**
 * Since when a node has had no live session anywhere (failover, issue 38): its recorded teardown, or the lease
 * expiry of the panel that owns it when that panel itself died (its report may still say connected), the later.
 */
const DOWN_SINCE = `(SELECT max(t) FROM (VALUES
    ((extract(epoch FROM n.last_teardown_at) * 1000)::float8),
    ((SELECT (extract(epoch FROM p.lease_until) * 1000)::float8 FROM node_owners w JOIN panels p ON p.id = w.panel_id
      WHERE w.node_id = n.id AND p.lease_until <= now()))) AS d(t))`;

/** Everything one evaluation reads, on the transaction it writes in. Times are the database's, in ms. */
export async function readState(tx: Tx, holdsSession: (nodeId: string) => boolean) {
  const sql = prismaSql(tx);
  const [clock] = await sql.rows<{ now_ms: number }>(`SELECT (extract(epoch FROM now()) * 1000)::float8 AS now_ms`);
  const services = await sql.rows<ServiceSql>(
    `SELECT s.id, s.node_id, h.name AS home_name, s.replicas, s.placement, s.volumes, s.fence, s.pending,
      s.rollout_max_surge AS max_surge, s.rollout_max_unavailable AS max_unavailable, s.rollout_progress_deadline_seconds AS progress_deadline_s, (extract(epoch FROM s.created_at) * 1000)::float8 AS created_ms,
      (EXISTS (SELECT 1 FROM routes r WHERE r.service_id = s.id) AND NOT COALESCE('${CAPABILITIES.ROUTING_REMOTE}' = ANY(h.capabilities), false)) AS routed
    FROM services s ${homeJoin('s', 'h')}
    WHERE ${managedSql('s', 'h')}
    ORDER BY s.id`,
  );
  // No managed service: nothing to place, move or fail over, and every other read is of managed services too. The
  // node read (every node, with its liveness) is the costly one: a fleet of agents without workload.allocations
  // pays nothing for it (10,000 nodes read at each evaluation slowed a reconnect storm fivefold, bench/fleet.ts).
  if (services.length === 0) return { now: Number(clock!.now_ms), services: [], nodes: [], allocations: [], deployments: [] };
  const nodes = await sql.rows<NodeSql>(
    `SELECT n.id, n.name, n.cordoned, n.evacuating, n.decommissioned, n.lost_at IS NOT NULL AS lost, n.labels, n.capabilities, ${LIVE_ELSEWHERE} AS live_elsewhere, ${DOWN_SINCE} AS down_ms,
      n.fence_after_ms, n.fence_stop_timeout_ms FROM nodes n ORDER BY n.name`,
  );
  const allocations = await sql.rows<AllocationSql>(
    `SELECT a.id, a.service_id, a.node_id, a.release_id, a.desired, (extract(epoch FROM a.created_at) * 1000)::float8 AS created_ms,
      a.status, (extract(epoch FROM a.status_at) * 1000)::float8 AS status_ms
    FROM allocations a JOIN services s ON s.id = a.service_id ${homeJoin('s', 'h')}
    WHERE ${managedSql('s', 'h')}`,
  );
  // deployments' times are timestamp(3) holding UTC (as Prisma writes them).
  const deployments = await sql.rows<DeploymentSql>(
    `SELECT d.id, d.service_id, d.status::text AS status, (extract(epoch FROM d.created_at AT TIME ZONE 'UTC') * 1000)::float8 AS created_ms,
      (extract(epoch FROM d.dispatched_at AT TIME ZONE 'UTC') * 1000)::float8 AS dispatched_ms, d.reason
    FROM deployments d JOIN services s ON s.id = d.service_id ${homeJoin('s', 'h')}
    WHERE ${managedSql('s', 'h')} AND d.status IN ('pending', 'delivered', 'running')`,
  );
  return {
    now: Number(clock!.now_ms),
    services: services.map(
      (s): ServiceRow => ({
        id: s.id,
        homeNodeId: s.node_id,
        homeName: s.home_name,
        pending: s.pending,
        replicas: s.replicas,
        placement: s.placement,
        routed: s.routed,
        stateful: hasWritableVolume({ volumes: (Array.isArray(s.volumes) ? s.volumes : []) as never }),
        createdAt: Number(s.created_ms),
        fenced: s.fence,
        rollout: { maxSurge: s.max_surge, maxUnavailable: s.max_unavailable, progressDeadlineSeconds: s.progress_deadline_s },
      }),
    ),
    nodes: nodes.map(
      (n): NodeFacts => ({
        id: n.id,
        name: n.name,
        live: holdsSession(n.id) || n.live_elsewhere,
        cordoned: n.cordoned,
        evacuating: n.evacuating,
        decommissioned: n.decommissioned,
        ...(n.lost ? { lost: true } : {}),
        labels: stringRecordOf(n.labels),
        capabilities: n.capabilities ?? [],
        downSince: n.down_ms === null ? null : Number(n.down_ms),
        fence: n.fence_after_ms === null ? null : { afterMs: n.fence_after_ms, stopTimeoutMs: n.fence_stop_timeout_ms ?? 0 },
      }),
    ),
    allocations: allocations.map(
      (a): AllocationRow => ({
        id: a.id,
        serviceId: a.service_id,
        nodeId: a.node_id,
        releaseId: a.release_id,
        desired: a.desired === 'stop' ? 'stop' : 'run',
        createdAt: Number(a.created_ms),
        status: a.status,
        statusAt: a.status_ms === null ? null : Number(a.status_ms),
      }),
    ),
    deployments: deployments.map(
      (d): DeploymentRow => ({
        id: d.id,
        serviceId: d.service_id,
        status: d.status,
        createdAt: Number(d.created_ms),
        dispatchedAt: d.dispatched_ms === null ? null : Number(d.dispatched_ms),
        reason: d.reason,
      }),
    ),
  };
}

const OPEN: ('pending' | 'delivered')[] = ['pending', 'delivered'];

/** Writes a plan on the fenced transaction: allocations first (placed, stopped, moved, removed), then deployments. */
export async function writePlan(tx: Tx, plan: EvaluationPlan, epoch: number): Promise<void> {
  const sql = prismaSql(tx);
  if (plan.insert.length > 0) {
    await sql.run(
      `INSERT INTO allocations (id, service_id, node_id, release_id, desired, cause, epoch, replaces)
      SELECT id, service_id, node_id, release_id, 'run', cause, $6::bigint, replaces
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $7::text[]) AS v(id, service_id, node_id, release_id, cause, replaces)`,
      [plan.insert.map((r) => r.id), plan.insert.map((r) => r.serviceId), plan.insert.map((r) => r.nodeId), plan.insert.map((r) => r.releaseId), plan.insert.map((r) => r.cause), epoch, plan.insert.map((r) => r.replaces ?? null)],
    );
  }
  if (plan.stop.length > 0) {
    await sql.run(`UPDATE allocations SET desired = 'stop', epoch = $2::bigint WHERE id = ANY($1::text[]) AND desired = 'run'`, [plan.stop.map((s) => s.allocationId), epoch]);
  }
  for (const move of plan.moves) {
    await sql.run(`UPDATE allocations SET release_id = $2, epoch = $3::bigint WHERE id = ANY($1::text[]) AND desired = 'run'`, [move.allocationIds, move.releaseId, epoch]);
  }
  if (plan.homes.length > 0) {
    // A service without a home gets its first replica's node (only while it has none), and its deployments with it.
    const ids = plan.homes.map((h) => h.serviceId);
    const nodes = plan.homes.map((h) => h.nodeId);
    await sql.run(`UPDATE services s SET node_id = v.node_id FROM unnest($1::text[], $2::text[]) AS v(id, node_id) WHERE s.id = v.id AND s.node_id IS NULL`, [ids, nodes]);
    await sql.run(`UPDATE deployments d SET node_id = s.node_id FROM services s WHERE s.id = ANY($1::text[]) AND d.service_id = s.id AND d.node_id IS NULL`, [ids]);
  }
  if (plan.pendingWrites.length > 0) {
    await sql.run(`UPDATE services s SET pending = v.pending FROM unnest($1::text[], $2::jsonb[]) AS v(id, pending) WHERE s.id = v.id`, [
      plan.pendingWrites.map((w) => w.serviceId),
      plan.pendingWrites.map((w) => (w.pending === null ? null : JSON.stringify(w.pending))),
    ]);
  }
  if (plan.remove.length > 0) {
    await sql.run(`DELETE FROM allocations WHERE id = ANY($1::text[]) AND desired = 'stop' AND status->>'state' = 'removed'`, [plan.remove]);
  }
  const now = new Date();
  for (const d of plan.deployments) {
    switch (d.kind) {
      case 'progress':
        await tx.deployment.updateMany({ where: { id: d.id, status: { in: OPEN } }, data: { reason: d.reason } });
        break;
      case 'running': {
        const done = await tx.deployment.updateMany({
          where: { id: d.id, status: { in: OPEN } },
          data: { status: 'running', reason: d.reason, finishedAt: now, runningAt: now, ...(d.imageRef ? { imageRef: d.imageRef } : {}) },
        });
        if (done.count > 0) {
          await tx.deployment.updateMany({ where: { serviceId: d.serviceId, status: 'running', id: { not: d.id } }, data: { status: 'superseded', reason: `replaced by deployment ${d.id}` } });
        }
        break;
      }
      case 'failed':
        await tx.deployment.updateMany({ where: { id: d.id, status: { in: OPEN } }, data: { status: 'failed', reason: d.reason, finishedAt: now } });
        break;
      case 'superseded':
        await tx.deployment.updateMany({ where: { id: d.id, status: { in: OPEN } }, data: { status: 'superseded', reason: d.reason, finishedAt: now } });
        break;
    }
  }
}

export interface EvacuationAnswer {
  moves: { serviceId: string; serviceName: string; allocationId: string; from: string; to: string }[];
  refused: { serviceId: string; serviceName: string; allocationId: string | null; code: string; message: string }[];
  pending: { serviceId: string; serviceName: string; count: number; code: string }[];
}

/**
 * What evacuating the node moves (one at a time, by the scheduler) and what refuses, read as an evaluation reads
 * (POST /v1/nodes/:id/evacuate). A service on it that the scheduler does not manage (its home node's agent does
 * not speak allocations, or TETHER_ALLOCATIONS is off) refuses with NOT_MANAGED_BY_ALLOCATIONS.
 */
export async function evacuationAnswer(prisma: Db, nodeId: string, holdsSession: (nodeId: string) => boolean): Promise<EvacuationAnswer> {
  return prisma.$transaction((tx) => evacuationAnswerIn(tx, nodeId, holdsSession));
}

/** The same, on a transaction of the caller's (the evacuation's own, so the answer is the state it commits). */
export async function evacuationAnswerIn(tx: Tx, nodeId: string, holdsSession: (nodeId: string) => boolean): Promise<EvacuationAnswer> {
  const state = await readState(tx, holdsSession);
  const preview = previewEvacuation(nodeId, state);
  const sql = prismaSql(tx);
  const unmanaged = await sql.rows<{ id: string; name: string }>(
    `SELECT s.id, s.name FROM services s JOIN nodes h ON h.id = s.node_id WHERE s.node_id = $1 AND s.replicas > 0 AND NOT ${managedSql('s', 'h')} ORDER BY s.name`,
    [nodeId],
  );
  const ids = [...new Set([...preview.moves, ...preview.refused, ...preview.pending].map((c) => c.serviceId))];
  const names = new Map((await sql.rows<{ id: string; name: string }>(`SELECT id, name FROM services WHERE id = ANY($1::text[])`, [ids])).map((r) => [r.id, r.name]));
  const nodeName = new Map(state.nodes.map((n) => [n.id, n.name]));
  const name = (id: string) => names.get(id) ?? id;
  return {
    moves: preview.moves.map((m) => ({ serviceId: m.serviceId, serviceName: name(m.serviceId), allocationId: m.allocationId, from: nodeName.get(m.from) ?? m.from, to: nodeName.get(m.to) ?? m.to })),
    refused: [
      ...preview.refused.map((r) => ({ serviceId: r.serviceId, serviceName: name(r.serviceId), allocationId: r.allocationId, code: r.reason, message: r.message })),
      ...unmanaged.map((s) => ({
        serviceId: s.id,
        serviceName: s.name,
        allocationId: null,
        code: 'NOT_MANAGED_BY_ALLOCATIONS',
        message: 'the service runs by deploy frames on this node (its agent does not speak workload.allocations, or TETHER_ALLOCATIONS is off): it does not move',
      })),
    ],
    pending: preview.pending.map((p) => ({ serviceId: p.serviceId, serviceName: name(p.serviceId), count: p.count, code: p.reason })),
  };
}
