import { createLoop, KeyedSerialQueue, sanitizeText, type Loop, type Logger } from '@tether/common';
import { CAPABILITIES, createIdGenerator, type CanaryStatus, type Heartbeat, type RoutingApplied, type ReloadKindCounts, type ProxyEvents, type ReloadKind, type RoutingStatus } from '@tether/protocol';
import type { SessionRegistry } from '../sessions/registry.js';
import { sameJson } from '../sessions/report.js';
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
    /** Reloads per kind since the agent's state began (agents that report them). */
    reloadKinds: ReloadKindCounts | null;
    /** The agent's canary through its own proxy (null: off, or an agent without one). */
    canary: CanaryStatus | null;
    /** Maps pushed to the node since this panel started: sent, answered applied, answered with an error or not delivered. */
    pushes: { sent: number; applied: number; failed: number };
  };
}

export interface ReloadRecorder {
  /**
   * A reload reported the old way (routing.applied with reloaded: true) by an agent without `proxy.events`.
   * `key` names the report (session and message id) so a retried write cannot record it twice.
   */
  reloaded(record: { nodeId: string; key?: string; at: Date; hashBefore: string | null; hashAfter: string; reason: string; kind?: ReloadKind }): Promise<void>;
}

/** Where `proxy.events` go: stored under their unique key, so a resent event is recorded once. */
export interface ProxyEventStore {
  /** Resolves with the events stored now (not stored before). */
  store(nodeId: string, events: ProxyEvents['events']): Promise<ProxyEvents['events']>;
}

export interface RoutingReconcilerOptions {
  sessions: SessionRegistry;
  maps: RoutingMapSource;
  reloads: ReloadRecorder;
  /** Default: no store, so `proxy.events` are never ACKed (the agent keeps them). */
  events?: ProxyEventStore;
  /** Told of every push's outcome (metrics). */
  onPush?: (node: string, outcome: 'sent' | 'applied' | 'failed') => void;
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
  reloadKinds: ReloadKindCounts | null;
  canary: CanaryStatus | null;
  pushes: number;
  applied: number;
  failed: number;
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

  /**
   * Routing of these nodes changed: push them once the debounce window closes.
   * The window is fixed from the first change of a burst (a steady trickle
   * cannot hold it open), and until it closes nothing about the burst goes
   * out: the map is recomputed only then, and a periodic push due inside the
   * window waits for it (pushDue), so a node never gets half a burst and a
   * burst costs one reload.
   */
  changed(nodeIds: string[], reason: string): void {
    for (const nodeId of nodeIds) {
      const reasons = this.pendingChanges.get(nodeId) ?? [];
      reasons.push(reason);
      this.pendingChanges.set(nodeId, reasons);
    }
    if (this.debounceTimer) return;
    this.debounceTimer = setTimeout(() => {
      this.debounceTimer = undefined;
      const batch = [...this.pendingChanges];
      this.pendingChanges.clear();
      for (const [nodeId, reasons] of batch) {
        this.state(nodeId).dirty = true;
        this.enqueue(nodeId, reasons.join('; '));
      }
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
      reloadKinds: s?.reloadKinds ?? null,
      canary: s?.canary ?? null,
      pushes: { sent: s?.pushes ?? 0, applied: s?.applied ?? 0, failed: s?.failed ?? 0 },
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

  private nextDelay(): number {
    const { intervalMs } = this.options;
    return Math.round(intervalMs * (1 - this.jitter + this.random() * 2 * this.jitter));
  }

  private pushDue(): void {
    const now = Date.now();
    for (const session of this.options.sessions.list()) {
      const s = this.state(session.nodeId);
      // A change window is open for this node: its push at the window's end is the next one.
      if (s.nextPushAt <= now && !this.pendingChanges.has(session.nodeId)) this.enqueue(session.nodeId, 'periodic reconcile');
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
      this.options.onPush?.(session.nodeName, 'sent');
      const message = { type: 'routing.map' as const, id: this.nextId(), version: desired.version, hash: desired.hash, routes: desired.routes };
      await session.sendAwaitingAck(message, undefined, this.frames.frame(message));
      this.options.logger.debug({ node: session.nodeName, hash: desired.hash, reason }, 'routing map pushed');
    } catch (err) {
      s.failed++;
      this.options.onPush?.(session.nodeName, 'failed');
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
    // Kept when equal, like the strings above: an unchanged heartbeat's objects die young.
    if (!sameJson(s.reloadKinds, routing.reloadKinds ?? null)) s.reloadKinds = routing.reloadKinds ?? null;
    if (!sameJson(s.canary, routing.canary ?? null)) s.canary = routing.canary ?? null;
    this.trackMismatch(s);
  }

  /** A heartbeat carries the applied hash and reload counters. */
  heartbeat(session: AgentSession, message: Heartbeat): void {
    this.absorb(this.state(session.nodeId), message.routing, message.routing.appliedHash);
  }

  /** routing.applied: the outcome of a push, with the hash now in place and the reload it cost. */
  applied(session: AgentSession, message: RoutingApplied): void {
    const s = this.state(session.nodeId);
    const before = s.appliedHash;
    this.absorb(s, message.routing, message.error ? message.routing.appliedHash : message.hash);
    if (message.error) s.failed++;
    else s.applied++;
    this.options.onPush?.(session.nodeName, message.error ? 'failed' : 'applied');
    // An agent with proxy.events reports every reload (also its own repairs) in that message, exactly once.
    if (message.reloaded && !session.hasCapability(CAPABILITIES.PROXY_EVENTS)) {
      void this.options.reloads
        .reloaded({
          nodeId: session.nodeId,
          key: `${session.id}/${message.id}`,
          at: new Date(),
          hashBefore: before,
          hashAfter: message.hash,
          // Free text from the agent: kept, but never a NUL or a control character in the row.
          reason: sanitizeText(message.routing.lastReloadReason ?? 'routing changed'),
        })
        .catch((err: unknown) => this.options.logger.error({ err, node: session.nodeName }, 'could not record reload'));
    }
  }

  /**
   * Stores reload and canary events, then ACKs them. No ACK when the store
   * fails: the agent keeps the events and sends them again (same keys), so
   * nothing is lost and nothing is counted twice.
   */
  proxyEvents(session: AgentSession, message: ProxyEvents): void {
    const store = this.options.events;
    if (!store) return;
    void store.store(session.nodeId, message.events).then(
      () => {
        session.send({ type: 'ack', id: this.nextId(), ref: message.id });
      },
      (err: unknown) => this.options.logger.error({ err, node: session.nodeName, events: message.events.length }, 'could not store proxy events; the agent sends them again'),
    );
  }
}
