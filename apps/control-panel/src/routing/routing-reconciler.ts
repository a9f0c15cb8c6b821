import { createLoop, KeyedSerialQueue, sanitizeText, type Loop, type Logger } from '@tether/common';
import { createIdGenerator, type AgentMessage, type RoutingStatus } from '@tether/protocol';
import type { SessionRegistry } from '../sessions/registry.js';
import type { AgentSession } from '../sessions/session.js';
import type { RoutingMapContent, RoutingMapSource } from './routing-map.js';
import { RoutingFrames } from './routing-frames.js';

// The self-healing half of incident 2: the panel pushes the complete routing
// map to every live session at once when the session opens, at once (after a
// short debounce that coalesces bursts) when routing changes, and every
// reconcile interval as a safety net, spread with jitter so a fleet that
// reconnected together is not pushed together. The agent compares and does
// nothing when nothing changed; the panel only tracks desired vs applied.

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
  };
}

export interface ReloadRecorder {
  reloaded(record: { nodeId: string; at: Date; hashBefore: string | null; hashAfter: string; reason: string }): Promise<void>;
}

export interface RoutingReconcilerOptions {
  sessions: SessionRegistry;
  maps: RoutingMapSource;
  reloads: ReloadRecorder;
  logger: Logger;
  intervalMs: number;
  debounceMs: number;
  /** Periodic pushes land at interval × [1 - jitter, 1 + jitter). */
  jitterRatio?: number;
  /** How often due periodic pushes are looked for. */
  tickMs?: number;
  random?: () => number;
}

interface NodeRouting {
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
  pushes: number;
}

export class RoutingReconciler implements RoutingView {
  private readonly nodes = new Map<string, NodeRouting>();
  private readonly pendingChanges = new Map<string, string[]>();
  private debounceTimer: NodeJS.Timeout | undefined;
  private readonly loop: Loop;
  private readonly nextId = createIdGenerator('r');
  private readonly jitter: number;
  private readonly random: () => number;
  /** Per node, pushes go out in order; a newer map never overtakes an older one. */
  private readonly pushes = new KeyedSerialQueue<string>();
  /** Each desired map serialized once, however many pushes and nodes carry it. */
  readonly frames = new RoutingFrames();

  constructor(private readonly options: RoutingReconcilerOptions) {
    this.jitter = options.jitterRatio ?? 0.5;
    this.random = options.random ?? Math.random;
    this.loop = createLoop({
      name: 'routing-reconcile',
      intervalMs: options.tickMs ?? Math.max(10, Math.min(1_000, Math.floor(options.intervalMs / 10))),
      run: () => this.pushDue(),
      onError: (err) => options.logger.error({ err }, 'routing reconcile tick failed'),
    });
  }

  start(): void {
    this.loop.start();
  }

  async stop(): Promise<void> {
    clearTimeout(this.debounceTimer);
    await this.loop.stop();
    await this.pushes.idle();
  }

  /** A session opened: what the agent said in hello is in place until its first heartbeat; push the map now. */
  sessionOpened(session: AgentSession): void {
    if (session.report) this.absorb(this.state(session.nodeId), session.report.routing, session.report.routing.appliedHash);
    this.enqueue(session.nodeId, 'session opened');
  }

  /** A session closed: a node without a session is not drifting, it is unreachable. */
  sessionClosed(session: AgentSession): void {
    if (!this.options.sessions.get(session.nodeId)) this.state(session.nodeId).mismatchSince = null;
  }

  /** Routing of these nodes changed: push them once the debounce window closes. */
  changed(nodeIds: string[], reason: string): void {
    for (const nodeId of nodeIds) {
      this.state(nodeId).dirty = true;
      const reasons = this.pendingChanges.get(nodeId) ?? [];
      reasons.push(reason);
      this.pendingChanges.set(nodeId, reasons);
    }
    if (this.debounceTimer) return;
    this.debounceTimer = setTimeout(() => {
      this.debounceTimer = undefined;
      const batch = [...this.pendingChanges];
      this.pendingChanges.clear();
      for (const [nodeId, reasons] of batch) this.enqueue(nodeId, reasons.join('; '));
    }, this.options.debounceMs);
  }

  forNode(nodeId: string): ReturnType<RoutingView['forNode']> {
    const s = this.nodes.get(nodeId);
    const since = s?.mismatchSince ?? null;
    const drifting = since !== null && Date.now() - since > this.options.intervalMs;
    return {
      desiredHash: s?.desired?.hash ?? null,
      appliedHash: s?.appliedHash ?? null,
      drifting,
      reloadsToday: s?.reloadsToday ?? 0,
      reloadsTotal: s?.reloadsTotal ?? 0,
      lastReloadAt: s?.lastReloadAt ?? null,
      lastReloadReason: s?.lastReloadReason ?? null,
    };
  }

  /** Pushes sent to a node since the panel started (for tests and dashboards). */
  pushCount(nodeId: string): number {
    return this.nodes.get(nodeId)?.pushes ?? 0;
  }

  private state(nodeId: string): NodeRouting {
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
        pushes: 0,
      };
      this.nodes.set(nodeId, s);
    }
    return s;
  }

  private nextDelay(): number {
    const { intervalMs } = this.options;
    return Math.round(intervalMs * (1 - this.jitter + this.random() * 2 * this.jitter));
  }

  private pushDue(): void {
    const now = Date.now();
    for (const session of this.options.sessions.list()) {
      const s = this.state(session.nodeId);
      if (s.nextPushAt <= now) this.enqueue(session.nodeId, 'periodic reconcile');
    }
  }

  private enqueue(nodeId: string, reason: string): void {
    const s = this.state(nodeId);
    // Schedule the next periodic push now, so a slow push is never queued twice by the tick.
    s.nextPushAt = Date.now() + this.nextDelay();
    void this.pushes.run(nodeId, () => this.push(nodeId, reason));
  }

  private async push(nodeId: string, reason: string): Promise<void> {
    const session = this.options.sessions.get(nodeId);
    if (!session || session.closed) return;
    const s = this.state(nodeId);
    try {
      if (!s.desired || s.dirty) {
        s.dirty = false;
        const content = await this.options.maps.mapFor(nodeId);
        if (!s.desired || s.desired.hash !== content.hash) {
          this.frames.use(content.hash, content.routes);
          if (s.desired) this.frames.drop(s.desired.hash);
          s.desired = { ...content, version: Date.now() };
        }
      }
      this.trackMismatch(s);
      const desired = s.desired;
      s.pushes++;
      const message = { type: 'routing.map' as const, id: this.nextId(), version: desired.version, hash: desired.hash, routes: desired.routes };
      await session.sendAwaitingAck(message, undefined, this.frames.frame(message));
      this.options.logger.debug({ node: session.nodeName, hash: desired.hash, reason }, 'routing map pushed');
    } catch (err) {
      // A missing ACK already tore the session down; the next session is pushed on open.
      this.options.logger.warn({ err, node: session.nodeName, reason }, 'routing map not delivered');
    }
  }

  private trackMismatch(s: NodeRouting): void {
    if (!s.desired || s.appliedHash === s.desired.hash) s.mismatchSince = null;
    else s.mismatchSince ??= Date.now();
  }

  /** Takes the agent's applied hash and reload counters. */
  private absorb(s: NodeRouting, routing: RoutingStatus, applied: string | null): void {
    // Assigned only when changed, so the strings of an unchanged heartbeat are not kept (see sessions/report.ts).
    if (s.appliedHash !== applied) s.appliedHash = applied;
    s.reloadsToday = routing.reloadsToday;
    s.reloadsTotal = routing.reloadsTotal;
    if (s.lastReloadAt !== routing.lastReloadAt) s.lastReloadAt = routing.lastReloadAt;
    if (s.lastReloadReason !== routing.lastReloadReason) s.lastReloadReason = routing.lastReloadReason;
    this.trackMismatch(s);
  }

  /** A frame of an established session: routing.applied and heartbeats carry the applied hash and reloads. */
  received(session: AgentSession, message: AgentMessage): void {
    if (message.type !== 'routing.applied' && message.type !== 'heartbeat') return;
    const s = this.state(session.nodeId);
    const before = s.appliedHash;
    this.absorb(s, message.routing, message.type === 'routing.applied' && !message.error ? message.hash : message.routing.appliedHash);
    if (message.type === 'routing.applied' && message.reloaded) {
      void this.options.reloads
        .reloaded({
          nodeId: session.nodeId,
          at: new Date(),
          hashBefore: before,
          hashAfter: message.hash,
          // Free text from the agent: kept, but never a NUL or a control character in the row.
          reason: sanitizeText(message.routing.lastReloadReason ?? 'routing changed'),
        })
        .catch((err: unknown) => this.options.logger.error({ err, node: session.nodeName }, 'could not record reload'));
    }
  }
}
