import type { CanaryStatus, ReloadKindCounts, RoutingStatus } from '@tether/protocol';
import { sameJson } from '../sessions/report.js';
import type { RoutingMapContent } from './routing-map.js';

// What the panel knows of each node's routing: the map it wants there, what
// the agent says is in place (hello, heartbeats, routing.applied), the reload
// counters and the canary the agent reports, and the pushes made. Session
// health, the fleet page and the reloads API read it through RoutingView; the
// reconciler (routing-reconciler.ts) schedules pushes from it.

/** Desired vs applied routing and reload counters of a node, as session health shows them. */
export interface RoutingView {
  forNode(nodeId: string): {
    desiredHash: string | null;
    appliedHash: string | null;
    drifting: boolean;
    reloadsToday: number;
    reloadsTotal: number;
    lastReloadAt: string | null;
    lastReloadReason: string | null;
    /** Reloads per kind since the agent's state began (agents that report them). */
    reloadKinds: ReloadKindCounts | null;
    /** The agent's canary through its own proxy (null: off, or an agent without one). */
    canary: CanaryStatus | null;
    /** Maps pushed to the node since this panel started: sent, answered applied, answered with an error or not delivered. */
    pushes: { sent: number; applied: number; failed: number };
  };
}

export interface NodeRouting {
  desired: (RoutingMapContent & { version: number }) | null;
  /** Stale when routing changed since `desired` was computed. */
  dirty: boolean;
  appliedHash: string | null;
  mismatchSince: number | null;
  nextPushAt: number;
  reloadsToday: number;
  reloadsTotal: number;
  lastReloadAt: string | null;
  lastReloadReason: string | null;
  reloadKinds: ReloadKindCounts | null;
  canary: CanaryStatus | null;
  pushes: number;
  applied: number;
  failed: number;
}

export class NodeRoutingBook implements RoutingView {
  private readonly nodes = new Map<string, NodeRouting>();

  /** A node is drifting once its applied hash has differed from the desired one for longer than this. */
  constructor(private readonly driftAfterMs: number) {}

  forNode(nodeId: string): ReturnType<RoutingView['forNode']> {
    const s = this.nodes.get(nodeId);
    const since = s?.mismatchSince ?? null;
    const drifting = since !== null && Date.now() - since > this.driftAfterMs;
    return {
      desiredHash: s?.desired?.hash ?? null,
      appliedHash: s?.appliedHash ?? null,
      drifting,
      reloadsToday: s?.reloadsToday ?? 0,
      reloadsTotal: s?.reloadsTotal ?? 0,
      lastReloadAt: s?.lastReloadAt ?? null,
      lastReloadReason: s?.lastReloadReason ?? null,
      reloadKinds: s?.reloadKinds ?? null,
      canary: s?.canary ?? null,
      pushes: { sent: s?.pushes ?? 0, applied: s?.applied ?? 0, failed: s?.failed ?? 0 },
    };
  }

  /** Pushes sent to a node since the panel started (for tests and dashboards). */
  pushCount(nodeId: string): number {
    return this.nodes.get(nodeId)?.pushes ?? 0;
  }

  /** The node's record, made on first use. */
  state(nodeId: string): NodeRouting {
    let s = this.nodes.get(nodeId);
    if (!s) {
      s = {
        desired: null,
        dirty: true,
        appliedHash: null,
        mismatchSince: null,
        nextPushAt: Number.POSITIVE_INFINITY,
        reloadsToday: 0,
        reloadsTotal: 0,
        lastReloadAt: null,
        lastReloadReason: null,
        reloadKinds: null,
        canary: null,
        pushes: 0,
        applied: 0,
        failed: 0,
      };
      this.nodes.set(nodeId, s);
    }
    return s;
  }

  trackMismatch(s: NodeRouting): void {
    if (!s.desired || s.appliedHash === s.desired.hash) s.mismatchSince = null;
    else s.mismatchSince ??= Date.now();
  }

  /** Takes the agent's applied hash and reload counters. */
  absorb(s: NodeRouting, routing: RoutingStatus, applied: string | null): void {
    // Assigned only when changed, so the strings of an unchanged heartbeat are not kept (see sessions/report.ts).
    if (s.appliedHash !== applied) s.appliedHash = applied;
    s.reloadsToday = routing.reloadsToday;
    s.reloadsTotal = routing.reloadsTotal;
    if (s.lastReloadAt !== routing.lastReloadAt) s.lastReloadAt = routing.lastReloadAt;
    if (s.lastReloadReason !== routing.lastReloadReason) s.lastReloadReason = routing.lastReloadReason;
    // Kept when equal, like the strings above: an unchanged heartbeat's objects die young.
    if (!sameJson(s.reloadKinds, routing.reloadKinds ?? null)) s.reloadKinds = routing.reloadKinds ?? null;
    if (!sameJson(s.canary, routing.canary ?? null)) s.canary = routing.canary ?? null;
    this.trackMismatch(s);
  }

}
