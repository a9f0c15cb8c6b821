import { EventEmitter } from 'node:events';
import { createLoop, type Loop, type Logger } from '@tether/common';
import { CLOSE_CODES, createIdGenerator, formatRetryHint } from '@tether/protocol';
import type { AgentSession } from './session.js';
import type { SessionGenerations } from './generations.js';
import type { SessionStore } from '../session-writes/session-store.js';

// The connected map. It holds only sessions that carried a frame within the
// read-idle deadline: a session leaves it the moment it is torn down, and
// nothing else (a flag, a row, a timestamp) may say a node is reachable.

export interface RegistryOptions {
  store: SessionStore;
  logger: Logger;
  pingIntervalMs: number;
  lastSeenFlushMs: number;
  /** Sizes the retry window a planned stop hints (absent: 1,500 a second). */
  restartOpensPerSec?: number;
  /** The generation each session's claim took (several panels); absent: none, as on a lone panel. */
  generations?: Pick<SessionGenerations, 'get'>;
}

/** Bounds of the hinted window: one agent still waits up to 1 s; a huge fleet is not told to wait minutes. */
const RESTART_WINDOW_MS = { min: 1_000, max: 60_000 };

export interface Teardown {
  nodeId: string;
  sessionId: string;
  code: number;
  reason: string;
  at: number;
}

export interface RegistryEvents {
  opened: [AgentSession];
  closed: [AgentSession, Teardown];
  /** A session's open or close is in the database (or spilled to the outbox's file, to be written in order). */
  recorded: [{ nodeId: string; kind: 'opened' | 'closed' }];
}

export class SessionRegistry extends EventEmitter<RegistryEvents> {
  private readonly sessions = new Map<string, AgentSession>();
  private readonly teardowns = new Map<string, Teardown>();
  private readonly flushed = new Map<string, number>();
  private readonly nextId = createIdGenerator('p');
  private readonly pingLoop: Loop;
  private readonly flushLoop: Loop;
  private readonly store: SessionStore;
  private readonly logger: Logger;

  constructor(private readonly options: RegistryOptions) {
    super();
    this.store = options.store;
    this.logger = options.logger;
    const onError = (err: unknown, name: string) => this.logger.error({ err, loop: name }, 'session loop failed');
    // One loop pings every session whose interval has passed (instead of a timer per session).
    this.pingLoop = createLoop({
      name: 'session-pings',
      intervalMs: Math.min(options.pingIntervalMs, 1_000),
      run: () => this.pingDue(),
      onError,
    });
    this.flushLoop = createLoop({ name: 'last-seen-flush', intervalMs: options.lastSeenFlushMs, run: () => this.flushLastSeen(), onError });
  }

  start(): void {
    this.pingLoop.start();
    this.flushLoop.start();
  }

  /** Set by stop(): no session opens any more (an upgrade authenticated just before would otherwise outlive the panel). */
  private stopping = false;

  get isStopping(): boolean {
    return this.stopping;
  }

  /**
   * The close reason of a planned stop: the retry window sized so the fleet comes back at about
   * restartOpensPerSec, set when stop() begins (the session count then is the fleet that will return).
   */
  private restartReason_ = formatRetryHint(RESTART_WINDOW_MS.min);

  get restartReason(): string {
    return this.restartReason_;
  }

  /** Closes every session (SERVICE_RESTART with a retry hint) and flushes what is pending. */
  async stop(): Promise<void> {
    if (!this.stopping) {
      const windowMs = (this.sessions.size * 1_000) / (this.options.restartOpensPerSec ?? 1_500);
      this.restartReason_ = formatRetryHint(Math.min(Math.max(windowMs, RESTART_WINDOW_MS.min), RESTART_WINDOW_MS.max));
    }
    this.stopping = true;
    await this.pingLoop.stop();
    await this.flushLoop.stop();
    for (const session of [...this.sessions.values()]) session.teardown(CLOSE_CODES.SERVICE_RESTART, this.restartReason_);
    // The closes and last-seen times are queued; the outbox writes (or spills) them when the app stops.
    await this.flushLastSeen();
  }

  get size(): number {
    return this.sessions.size;
  }

  /** The live session of a node, if it has one. */
  get(nodeId: string): AgentSession | undefined {
    return this.sessions.get(nodeId);
  }

  list(): AgentSession[] {
    return [...this.sessions.values()];
  }

  lastTeardown(nodeId: string): Teardown | undefined {
    return this.teardowns.get(nodeId);
  }

  /** Adds a session that completed its hello. An older session of the same node is superseded. */
  open(session: AgentSession): void {
    // The newer session always wins: the old one is closed first, as superseded, so the node never reads unreachable.
    this.sessions.get(session.nodeId)?.teardown(CLOSE_CODES.SUPERSEDED, `superseded by session ${session.id}`);
    this.sessions.set(session.nodeId, session);
    const generation = this.options.generations?.get(session.id);
    this.write(session.nodeId, () =>
      this.store.sessionOpened({
        nodeId: session.nodeId,
        sessionId: session.id,
        at: new Date(session.openedAt),
        capabilities: session.capabilities,
        privateAddress: session.privateAddress,
        challengePort: session.challengePort,
        fence: session.fence,
        ...(generation === undefined ? {} : { generation }),
      }),
      'opened',
    );
    this.logger.info({ node: session.nodeName, nodeId: session.nodeId, sessionId: session.id, peer: session.peer }, 'session opened');
    this.emit('opened', session);
  }

  /** The teardown listener every session is created with. */
  readonly onTeardown = (session: AgentSession, code: number, reason: string): void => {
    const current = this.sessions.get(session.nodeId) === session;
    if (current) this.sessions.delete(session.nodeId);
    const superseded = code === CLOSE_CODES.SUPERSEDED || !current;
    const teardown: Teardown = { nodeId: session.nodeId, sessionId: session.id, code, reason, at: session.closed?.at ?? Date.now() };
    const generation = this.options.generations?.get(session.id);
    if (!superseded) this.teardowns.set(session.nodeId, teardown);
    this.write(session.nodeId, () =>
      this.store.sessionClosed({
        nodeId: session.nodeId,
        sessionId: session.id,
        code,
        reason,
        at: new Date(teardown.at),
        lastFrameAt: new Date(session.lastFrameAt),
        superseded,
        ...(generation === undefined ? {} : { generation }),
      }),
      'closed',
    );
    this.logger.warn({ node: session.nodeName, nodeId: session.nodeId, sessionId: session.id, code, reason }, 'session closed');
    this.emit('closed', session, teardown);
  };

  /** Closes the node's session, if any (decommission). */
  close(nodeId: string, code: number, reason: string): boolean {
    const session = this.sessions.get(nodeId);
    if (!session) return false;
    session.teardown(code, reason);
    return true;
  }

  /**
   * Hands a session fact to the store's ordered writer, which keeps each node's
   * order and retries through outages; only a fact the database rejects for
   * good (a bug) ends up here.
   */
  private write(nodeId: string, op: () => Promise<void>, kind: 'opened' | 'closed'): void {
    op().then(
      () => this.emit('recorded', { nodeId, kind }),
      (err: unknown) => this.logger.error({ err, nodeId }, 'session store write failed'),
    );
  }

  private pingDue(): void {
    const now = Date.now();
    for (const session of this.sessions.values()) session.pingIfDue(now, this.options.pingIntervalMs, this.nextId());
  }

  /** Writes last-seen times of sessions that carried frames since the last flush: one statement. */
  async flushLastSeen(): Promise<void> {
    const entries: { nodeId: string; at: Date }[] = [];
    for (const session of this.sessions.values()) {
      if ((this.flushed.get(session.nodeId) ?? 0) >= session.lastFrameAt) continue;
      entries.push({ nodeId: session.nodeId, at: new Date(session.lastFrameAt) });
    }
    if (entries.length === 0) return;
    await this.store.flushLastSeen(entries);
    for (const e of entries) this.flushed.set(e.nodeId, e.at.getTime());
    for (const nodeId of this.flushed.keys()) if (!this.sessions.has(nodeId)) this.flushed.delete(nodeId);
  }
}
