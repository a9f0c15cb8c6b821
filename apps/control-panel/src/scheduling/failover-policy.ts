import { compareText } from './order.js';
import type { NodeState, ScheduleResult } from './types.js';

// When an unreachable node counts as lost (issue 38): the liveness truth (no
// live session on any panel) held for a grace, and never on a guess. The
// scheduler re-places a lost node's stateless replicas; this pure function
// decides which nodes are lost, and when the control plane's own hiccup
// (many nodes unreachable at once, a panel just started, a database outage
// just ended) puts a brake on all of it. Pacing keeps a large re-placement
// from becoming a stampede: a budget of replacements per minute, oldest
// services first. A fenced service's replicas (failover.fence, capability
// workload.fence) wait longer: until their node's agent has certainly fenced
// them (fencedReplaceAt). Tested without I/O (test/scheduling-failover.test.ts).

export interface FailoverSettings {
  /** A node with no live session on any panel for this long is lost (TETHER_RESCHEDULE_AFTER_MS). */
  rescheduleAfterMs: number;
  /** More than this share of the nodes unreachable at once: nothing is re-placed (TETHER_RESCHEDULE_MAX_UNREACHABLE). */
  maxUnreachableFraction: number;
}

export interface NodeLiveness {
  id: string;
  name: string;
  live: boolean;
  decommissioned: boolean;
  /** An operator said the host is gone (POST /v1/nodes/:id/lost): lost at once, brake or not. */
  lostByOperator: boolean;
  /**
   * Since when the node has had no live session anywhere (epoch ms): its recorded teardown, or its owner's
   * lease expiry when the owning panel itself died. Null while live.
   */
  downSince: number | null;
  /**
   * What its agent announced in hello.fence at its last session open (nodes.fence_after_ms, fence_stop_timeout_ms);
   * null or absent: it does not fence (it was never sent a fenced release), so its fenced replicas wait the grace only.
   */
  fence?: NodeFence | null;
}

/** An agent's fence: it stops fenced containers `afterMs` after the last panel frame, each within `stopTimeoutMs`. */
export interface NodeFence {
  afterMs: number;
  stopTimeoutMs: number;
}

/**
 * Added to a fenced replica's wait beyond its agent's fence deadline and stop grace: the agent's timer firing late
 * (a busy event loop), Docker's stop and remove calls, and clocks that advance at slightly different rates.
 */
export const FENCE_MARGIN_MS = 5_000;

/**
 * When a fenced replica of a node down since `downSince` may be re-placed: once its agent has fenced it for certain.
 * The agent fences `afterMs` after the last frame it received, which came before the panel's teardown (the panel
 * tears a session down only after silence, and the last frame it sent was before that), so counting from the
 * teardown (or the owner's lease expiry) is safe: + `afterMs` + `stopTimeoutMs` + FENCE_MARGIN_MS. Never before the
 * grace every replica waits.
 */
export function fencedReplaceAt(downSince: number, graceMs: number, fence: NodeFence | null | undefined): number {
  if (!fence) return downSince + graceMs;
  return downSince + Math.max(graceMs, fence.afterMs + fence.stopTimeoutMs + FENCE_MARGIN_MS);
}

/** When the control plane itself may have made nodes look dead. */
export interface ControlPlaneClock {
  /** This panel's start (epoch ms): it has not seen sessions for a grace yet. */
  panelStartedAt: number;
  /** The end of the last database outage this panel saw (epoch ms), if any. */
  databaseBackAt: number | null;
  /**
   * The last evaluation that found too many nodes unreachable (epoch ms), if any: a partition heals node by node,
   * and the nodes still away when the share drops back are held for one more grace (not lost at once).
   */
  manyUnreachableAt?: number | null;
}

export type Brake =
  | { reason: 'TOO_MANY_UNREACHABLE'; unreachable: number; nodes: number }
  | { reason: 'PANEL_STARTED'; until: number }
  | { reason: 'DATABASE_RECOVERED'; until: number }
  | { reason: 'MANY_UNREACHABLE_RECENTLY'; until: number };

export interface FailoverView {
  states: Map<string, NodeState>;
  /** Lost nodes whose fenced replicas still wait for their agent's fence (fencedReplaceAt): holdFenced keeps them. */
  fenceHeld: Set<string>;
  brake: Brake | null;
  /** The next time a state or the brake changes by the clock alone (epoch ms), or null. */
  nextChangeAt: number | null;
}

export function failoverView(nodes: readonly NodeLiveness[], now: number, settings: FailoverSettings, plane: ControlPlaneClock): FailoverView {
  const counted = nodes.filter((n) => !n.decommissioned && !n.lostByOperator);
  const unreachable = counted.filter((n) => !n.live);
  const grace = settings.rescheduleAfterMs;
  let brake: Brake | null = null;
  // The control plane's own hiccups first: right after a panel start or a database outage every agent is still
  // (re)connecting, so many nodes look unreachable by design; that is the reason to show, not a mass failure.
  if (now < plane.panelStartedAt + grace) {
    brake = { reason: 'PANEL_STARTED', until: plane.panelStartedAt + grace };
  } else if (plane.databaseBackAt !== null && now < plane.databaseBackAt + grace) {
    brake = { reason: 'DATABASE_RECOVERED', until: plane.databaseBackAt + grace };
  } else if (unreachable.length > 1 && unreachable.length / counted.length > settings.maxUnreachableFraction) {
    // One node down is never a mass failure: in a small fleet it is already past any share (1 of 3 is 33 %), and
    // failing over one lost host is the point; the brake is for several at once, as a partition makes them.
    brake = { reason: 'TOO_MANY_UNREACHABLE', unreachable: unreachable.length, nodes: counted.length };
  } else if (plane.manyUnreachableAt != null && now < plane.manyUnreachableAt + grace) {
    brake = { reason: 'MANY_UNREACHABLE_RECENTLY', until: plane.manyUnreachableAt + grace };
  }
  const states = new Map<string, NodeState>();
  const fenceHeld = new Set<string>();
  let nextChangeAt: number | null = brake && 'until' in brake ? brake.until : null;
  const later = (at: number) => (nextChangeAt = nextChangeAt === null ? at : Math.min(nextChangeAt, at));
  for (const node of nodes) {
    if (node.decommissioned || node.lostByOperator) states.set(node.id, 'lost');
    else if (node.live) states.set(node.id, 'live');
    else {
      // No time recorded (never seen going down): counted from now, never from the epoch.
      const dueAt = (node.downSince ?? now) + grace;
      const due = now >= dueAt;
      states.set(node.id, due && brake === null ? 'lost' : 'unreachable');
      if (!due) later(dueAt);
      const fencedAt = fencedReplaceAt(node.downSince ?? now, grace, node.fence);
      if (now < fencedAt) {
        if (due && brake === null) fenceHeld.add(node.id);
        if (fencedAt !== dueAt) later(fencedAt);
      }
    }
  }
  return { states, fenceHeld, brake, nextChangeAt };
}

/**
 * Keeps the replicas of fenced services on `held` nodes (failoverView's fenceHeld) where they are: neither stopped
 * nor replaced until their agent has fenced them; a later evaluation takes them up, as paceReplacements' deferred.
 */
export function holdFenced(result: ScheduleResult, fencedServices: ReadonlySet<string>, held: ReadonlySet<string>): ScheduleResult {
  if (held.size === 0 || fencedServices.size === 0) return result;
  const kept = new Set(result.stop.filter((s) => s.cause === 'node-lost' && fencedServices.has(s.serviceId) && held.has(s.nodeId)).map((s) => s.allocationId));
  if (kept.size === 0) return result;
  return {
    ...result,
    place: result.place.filter((p) => !(p.cause === 'node-lost' && p.replaces !== undefined && kept.has(p.replaces))),
    stop: result.stop.filter((s) => !kept.has(s.allocationId)),
  };
}

/**
 * At most `budget` replacements of lost replicas, the oldest services first (ties by id); each deferred
 * replacement keeps its lost allocation (not stopped), so it is taken up by a later evaluation.
 */
export function paceReplacements(result: ScheduleResult, budget: number, createdAt: ReadonlyMap<string, number>): { result: ScheduleResult; deferred: number } {
  const replacements = result.place.filter((p) => p.cause === 'node-lost');
  if (replacements.length <= budget) return { result, deferred: 0 };
  const age = (serviceId: string) => createdAt.get(serviceId) ?? Number.MAX_SAFE_INTEGER;
  const ordered = [...replacements].sort((a, b) => age(a.serviceId) - age(b.serviceId) || compareText(a.serviceId, b.serviceId) || compareText(a.replaces ?? '', b.replaces ?? ''));
  const later = new Set(ordered.slice(Math.max(0, budget)));
  const keptLost = new Set([...later].map((p) => p.replaces).filter((id): id is string => id !== undefined));
  return {
    result: {
      ...result,
      place: result.place.filter((p) => !later.has(p)),
      stop: result.stop.filter((s) => !(s.cause === 'node-lost' && keptLost.has(s.allocationId))),
    },
    deferred: later.size,
  };
}
