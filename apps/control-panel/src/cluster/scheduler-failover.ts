import type { Logger } from '@tether/common';
import { failoverView, type Brake, type FailoverSettings } from '../scheduling/failover-policy.js';
import type { EvaluationPlan } from '../scheduling/evaluation.js';
import type { NodeFacts } from '../scheduling/managed.js';

// The scheduler holder's memory for failover (issue 38, scheduler-loop.ts):
// its own start and the end of the last database outage it saw (the brake
// holds one grace after each), the last evaluation that found too many nodes
// unreachable, and the re-placements of the last minute (the pace). A new
// holder starts a fresh minute. failoverView (scheduling/failover-policy.ts)
// decides; this keeps its clocks and logs what it did, once per change.

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

export class FailoverTracker {
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
  status: FailoverStatus | null = null;

  /** `settings` absent: nothing is ever re-placed off an unreachable node (view() answers null). */
  constructor(
    private readonly settings: (FailoverSettings & { perMinute: number }) | undefined,
    private readonly logger: Logger,
  ) {}

  /** The lease changed hands: a new holder starts a fresh minute. */
  leaseChanged(): void {
    this.#replacedAt = [];
  }

  /** An evaluation failed: the scheduler's own view of a database outage begins (or goes on). */
  evaluationFailed(): void {
    this.#databaseDown = true;
  }

  /** An evaluation committed: the first after failures ends the outage. */
  evaluationCommitted(): void {
    if (!this.#databaseDown) return;
    this.#databaseDown = false;
    this.#databaseBackAt = performance.now();
  }

  /** failoverView over the nodes as read now (database clock), with this panel's start and outage end on that clock. */
  view(nodes: readonly NodeFacts[], now: number) {
    const settings = this.settings;
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
  report(status: FailoverStatus | null, plan: EvaluationPlan, now: number, epoch: number): void {
    if (!status) return;
    const replaced = plan.insert.filter((row) => row.cause === 'node-lost');
    for (let i = 0; i < replaced.length; i++) this.#replacedAt.push(now);
    this.#replaced += replaced.length;
    status.replaced = this.#replaced;
    const before = this.status;
    this.status = status;
    const { logger } = this;
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
