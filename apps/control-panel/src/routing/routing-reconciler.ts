import { createLoop, KeyedSerialQueue, type Loop, type Logger } from '@tether/common';
import { createIdGenerator, type Heartbeat, type ProxyEvents, type Route, type RoutingApplied } from '@tether/protocol';
import type { SessionRegistry } from '../sessions/registry.js';
import type { AgentSession } from '../sessions/session.js';
import { NodeRoutingBook, type RoutingView } from './node-routing-book.js';
import { ProxyEventIntake, type ProxyEventStore, type ReloadRecorder } from './proxy-event-intake.js';
import type { RoutingMapSource } from './routing-map.js';
import { RoutingFrames } from './routing-frames.js';

export type { RoutingView } from './node-routing-book.js';
export type { ProxyEventStore, ReloadRecorder } from './proxy-event-intake.js';

// The self-healing half of incident 2: the panel pushes the complete routing
// map to every live session at once when the session opens, at once (after a
// short debounce that coalesces bursts) when routing changes, and every
// reconcile interval as a safety net, spread with jitter so a fleet that
// reconnected together is not pushed together. The agent compares and does
// nothing when nothing changed; the panel only tracks desired vs applied
// (node-routing-book.ts) and records the reloads agents report
// (proxy-event-intake.ts). This file is the scheduling: when a node is pushed.

export interface RoutingReconcilerOptions {
  sessions: SessionRegistry;
  maps: RoutingMapSource;
  reloads: ReloadRecorder;
  /** Default: no store, so `proxy.events` are never ACKed (the agent keeps them). */
  events?: ProxyEventStore;
  /** certificates.share: after each push, the certificates the map names another issuer for (certificate-relay.ts). */
  certificates?: { push(session: AgentSession, routes: readonly Route[]): Promise<void> };
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

export class RoutingReconciler implements RoutingView {
  private readonly book: NodeRoutingBook;
  private readonly intake: ProxyEventIntake;
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
    this.book = new NodeRoutingBook(options.intervalMs);
    this.intake = new ProxyEventIntake({ reloads: options.reloads, ...(options.events ? { events: options.events } : {}), logger: options.logger });
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
    if (session.report) this.book.absorb(this.book.state(session.nodeId), session.report.routing, session.report.routing.appliedHash);
    this.enqueue(session.nodeId, 'session opened');
  }

  /** A session closed: a node without a session is not drifting, it is unreachable. */
  sessionClosed(session: AgentSession): void {
    if (!this.options.sessions.get(session.nodeId)) this.book.state(session.nodeId).mismatchSince = null;
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
        this.book.state(nodeId).dirty = true;
        this.enqueue(nodeId, reasons.join('; '));
      }
    }, this.options.debounceMs);
  }

  private nextDelay(): number {
    const { intervalMs } = this.options;
    return Math.round(intervalMs * (1 - this.jitter + this.random() * 2 * this.jitter));
  }

  private pushDue(): void {
    const now = Date.now();
    for (const session of this.options.sessions.list()) {
      const s = this.book.state(session.nodeId);
      // A change window is open for this node: its push at the window's end is the next one.
      if (s.nextPushAt <= now && !this.pendingChanges.has(session.nodeId)) this.enqueue(session.nodeId, 'periodic reconcile');
    }
  }

  private enqueue(nodeId: string, reason: string): void {
    const s = this.book.state(nodeId);
    // Schedule the next periodic push now, so a slow push is never queued twice by the tick.
    s.nextPushAt = Date.now() + this.nextDelay();
    void this.pushes.run(nodeId, () => this.push(nodeId, reason));
  }

  private async push(nodeId: string, reason: string): Promise<void> {
    const session = this.options.sessions.get(nodeId);
    if (!session || session.closed) return;
    const s = this.book.state(nodeId);
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
      this.book.trackMismatch(s);
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
      return;
    }
    // After the map that names the issuer, in the same per-node order: a stored certificate's push is a routing change.
    await this.options.certificates?.push(session, s.desired.routes).catch((err: unknown) => this.options.logger.warn({ err, node: session.nodeName, reason }, 'certificates not delivered'));
  }

  /** A heartbeat carries the applied hash and reload counters. */
  heartbeat(session: AgentSession, message: Heartbeat): void {
    this.book.absorb(this.book.state(session.nodeId), message.routing, message.routing.appliedHash);
  }

  /** routing.applied: the outcome of a push, with the hash now in place and the reload it cost. */
  applied(session: AgentSession, message: RoutingApplied): void {
    const s = this.book.state(session.nodeId);
    const before = s.appliedHash;
    this.book.absorb(s, message.routing, message.error ? message.routing.appliedHash : message.hash);
    if (message.error) s.failed++;
    else s.applied++;
    this.options.onPush?.(session.nodeName, message.error ? 'failed' : 'applied');
    this.intake.applied(session, message, before);
  }

  /** proxy.events: stored, then ACKed (proxy-event-intake.ts). */
  proxyEvents(session: AgentSession, message: ProxyEvents): void {
    this.intake.proxyEvents(session, message);
  }

  forNode(nodeId: string): ReturnType<RoutingView['forNode']> {
    return this.book.forNode(nodeId);
  }

  /** Pushes sent to a node since the panel started (for tests and dashboards). */
  pushCount(nodeId: string): number {
    return this.book.pushCount(nodeId);
  }
}
