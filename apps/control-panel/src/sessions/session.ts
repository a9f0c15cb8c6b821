import { randomBytes } from 'node:crypto';
import type { WebSocket } from 'ws';
import { Deadline, truncate, type DeadlineClock } from '@tether/common';
import { CAPABILITIES, CLOSE_CODES, encode, type ContainerState, type HelloFence, type PanelMessage, type RoutingStatus, type RuntimeStatus } from '@tether/protocol';
import { PanelError } from '../errors.js';
import { nextReport, type NodeReport } from './report.js';

// One agent's WebSocket session. Its reads run under a read-idle deadline: any
// valid inbound frame refreshes the timer, silence past it tears the session
// down. A session is alive only while it carries traffic.

export interface SessionTiming {
  idleTimeoutMs: number;
  ackTimeoutMs: number;
  sendBufferLimitBytes: number;
  /** Where the idle and ACK deadlines read time; the system's monotonic clock unless a test injects one. */
  clock?: DeadlineClock;
}

/** A message encoded ahead: the UTF-8 of `head` followed by `tail` is exactly encode(message). */
export interface PreparedFrame {
  head: string;
  /** Empty, or shared by many sends and sent as it is (a second fragment of the message). */
  tail: Buffer;
}

export class SessionClosedError extends PanelError<'SESSION_CLOSED'> {
  constructor(readonly closeCode: number, reason: string) {
    super('SESSION_CLOSED', reason);
  }
}

export class AckTimeoutError extends PanelError<'SESSION_ACK_TIMEOUT'> {
  constructor(readonly ref: string, readonly timeoutMs: number) {
    super('SESSION_ACK_TIMEOUT', `no ack for ${ref} within ${timeoutMs} ms`);
  }
}

interface AckWaiter {
  resolve: () => void;
  reject: (err: Error) => void;
  /** Until the frame is written: the write timer; then the ACK deadline. */
  cancel: () => void;
}

export type TeardownListener = (session: AgentSession, code: number, reason: string) => void;

/**
 * Sends a close frame and destroys the socket a second later: a half-open peer
 * never answers the close handshake, and waiting for it would keep the socket.
 */
export function closeHard(socket: WebSocket, code: number, reason: string): void {
  try {
    // A close reason is at most 123 bytes of UTF-8.
    socket.close(code, truncate(reason, 120));
  } catch {
    /* socket already unusable */
  }
  setTimeout(() => socket.terminate(), 1_000).unref();
}

export const newSessionId = () => `ses_${randomBytes(9).toString('base64url')}`;

export class AgentSession {
  readonly id = newSessionId();
  readonly openedAt = Date.now();
  private frameAt = this.openedAt;
  private heartbeatCount = 0;
  private heartbeatSeq = -1;
  private pingCount = 0;
  private pingAt = this.openedAt;
  private pongCount = 0;
  private missedAckCount = 0;
  private invalidCount = 0;
  /** Invalid frames in a row; reset by a valid one. */
  private invalidStreak = 0;
  private lastReport: NodeReport | null = null;
  /** Optional protocol features both ends named (hello ∩ what this panel speaks), sent back in welcome. */
  private capabilitySet: ReadonlySet<string> = new Set();
  /** hello.privateAddress when the session agreed routing.remote (nodes.private_address); null otherwise. */
  privateAddress: string | null = null;
  /** hello.challengePort when the session agreed certificates.share (nodes.challenge_port); null otherwise. */
  challengePort: number | null = null;
  /** hello.fence when the session agreed workload.fence (nodes.fence_after_ms, fence_stop_timeout_ms); null otherwise. */
  fence: HelloFence | null = null;
  closed: { code: number; reason: string; at: number } | null = null;

  private readonly idle: Deadline;
  private readonly waiters = new Map<string, AckWaiter>();

  constructor(
    private readonly socket: WebSocket,
    readonly nodeId: string,
    readonly nodeName: string,
    readonly peer: string,
    readonly agentVersion: string,
    private readonly timing: SessionTiming,
    private readonly onTeardown: TeardownListener,
  ) {
    this.idle = new Deadline({ timeoutMs: timing.idleTimeoutMs, onExpire: (silentMs) => this.onIdle(silentMs), clock: timing.clock });
  }

  /** A valid frame arrived: the session proved itself alive. */
  touch(now = Date.now()): void {
    this.frameAt = now;
    this.invalidStreak = 0;
    if (!this.closed) this.idle.touch();
  }

  /** An invalid frame arrived; returns how many came in a row. */
  recordInvalid(): number {
    this.invalidCount++;
    return ++this.invalidStreak;
  }

  /** Fixes the capabilities of this session (at hello, before welcome), and the private address under routing.remote. */
  setCapabilities(capabilities: readonly string[], privateAddress: string | null = null, challengePort: number | null = null, fence: HelloFence | null = null): void {
    this.capabilitySet = new Set(capabilities);
    this.fence = this.capabilitySet.has(CAPABILITIES.WORKLOAD_FENCE) ? fence : null;
    this.privateAddress = this.capabilitySet.has(CAPABILITIES.ROUTING_REMOTE) ? privateAddress : null;
    // Forwarded challenges reach the issuer at its private address: a port without one names nothing.
    this.challengePort = this.capabilitySet.has(CAPABILITIES.CERTIFICATES_SHARE) && this.privateAddress !== null ? challengePort : null;
  }

  hasCapability(capability: string): boolean {
    return this.capabilitySet.has(capability);
  }

  /** The capabilities both ends named, sorted (what nodes.capabilities records at the session's open). */
  get capabilities(): string[] {
    return [...this.capabilitySet].sort();
  }

  /** What the agent said in hello: in place until its first heartbeat. */
  recordHello(containers: ContainerState[], runtime: RuntimeStatus, routing: RoutingStatus): void {
    this.lastReport = { containers, runtime, routing, at: this.openedAt };
  }

  /** A heartbeat (already touched): its report replaces the previous one, which is kept when unchanged. */
  recordHeartbeat(seq: number, containers: ContainerState[], runtime: RuntimeStatus, routing: RoutingStatus): void {
    this.heartbeatCount++;
    this.heartbeatSeq = seq;
    this.lastReport = nextReport(this.lastReport, containers, runtime, routing, this.frameAt);
  }

  recordPong(): void {
    this.pongCount++;
  }

  /** Sends a ping when `intervalMs` passed since the last one. */
  pingIfDue(now: number, intervalMs: number, id: string): void {
    if (now - this.pingAt < intervalMs) return;
    this.pingAt = now;
    if (this.send({ type: 'ping', id })) this.pingCount++;
  }

  /** When the last valid frame arrived (ms since epoch). */
  get lastFrameAt(): number {
    return this.frameAt;
  }
  get heartbeats(): number {
    return this.heartbeatCount;
  }
  /** -1 before the first heartbeat. */
  get lastHeartbeatSeq(): number {
    return this.heartbeatSeq;
  }
  get pingsSent(): number {
    return this.pingCount;
  }
  get pongs(): number {
    return this.pongCount;
  }
  get missedAcks(): number {
    return this.missedAckCount;
  }
  get invalidFrames(): number {
    return this.invalidCount;
  }
  /** What the agent last reported; null never after hello. */
  get report(): NodeReport | null {
    return this.lastReport;
  }

  /** `silentMs` is measured on the monotonic clock and is never below the deadline (see Deadline). */
  private onIdle(silentMs: number): void {
    const silentFor = Math.floor(silentMs);
    this.teardown(CLOSE_CODES.IDLE_TIMEOUT, `no frame for ${silentFor} ms (read-idle deadline ${this.timing.idleTimeoutMs} ms)`);
  }

  /**
   * Sends a message; tears the session down when the peer has stopped reading.
   * `prepared`: the message encoded ahead by the caller (a routing map sent to
   * many sessions is serialized once, see RoutingFrames).
   */
  send(message: PanelMessage, prepared?: PreparedFrame, onWritten?: (err?: Error) => void): boolean {
    if (this.closed) return false;
    if (this.socket.bufferedAmount > this.timing.sendBufferLimitBytes) {
      this.teardown(CLOSE_CODES.SLOW_CONSUMER, `peer stopped reading: ${this.socket.bufferedAmount} bytes unsent`);
      return false;
    }
    if (!prepared || prepared.tail.length === 0) {
      this.socket.send(prepared?.head ?? encode(message), onWritten);
    } else {
      // Two fragments of one text message, written in the same tick so nothing can come between them;
      // ws writes a Buffer fragment by reference, so the shared tail is never copied per session.
      this.socket.send(prepared.head, { fin: false });
      this.socket.send(prepared.tail, { binary: false, fin: true }, onWritten);
    }
    return true;
  }

  /**
   * Sends a message that must be ACKed. No ACK within the ACK timeout kills the
   * session (the channel is dead, whatever TCP says) and rejects with AckTimeoutError.
   */
  sendAwaitingAck(message: PanelMessage, timeoutMs = this.timing.ackTimeoutMs, prepared?: PreparedFrame): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new SessionClosedError(this.closed.code, this.closed.reason));
      const expire = () => {
        this.waiters.delete(message.id);
        this.missedAckCount++;
        reject(new AckTimeoutError(message.id, timeoutMs));
        this.teardown(CLOSE_CODES.ACK_TIMEOUT, `${message.type} ${message.id} not acknowledged within ${timeoutMs} ms`);
      };
      // The ACK clock starts once the frame is written out, not when it is queued: a large map pushed to
      // every session at once must not count its time in the panel's own send queue against the agent.
      // A frame that cannot even be written in three ACK timeouts means the peer stopped reading.
      const writeTimer = setTimeout(() => {
        this.waiters.delete(message.id);
        reject(new SessionClosedError(CLOSE_CODES.SLOW_CONSUMER, `${message.type} ${message.id} not written within ${3 * timeoutMs} ms`));
        this.teardown(CLOSE_CODES.SLOW_CONSUMER, `${message.type} ${message.id} not written within ${3 * timeoutMs} ms`);
      }, 3 * timeoutMs);
      const waiter: AckWaiter = { resolve, reject, cancel: () => clearTimeout(writeTimer) };
      this.waiters.set(message.id, waiter);
      const sent = this.send(message, prepared, (err) => {
        if (err || this.waiters.get(message.id) !== waiter) return;
        clearTimeout(writeTimer);
        const ack = new Deadline({ timeoutMs, onExpire: expire, clock: this.timing.clock });
        waiter.cancel = () => ack.cancel();
      });
      if (!sent) {
        waiter.cancel();
        this.waiters.delete(message.id);
        const closed = this.closed ?? { code: CLOSE_CODES.SLOW_CONSUMER, reason: 'send failed' };
        reject(new SessionClosedError(closed.code, closed.reason));
      }
    });
  }

  /** Returns false for an ACK nobody waits for (late, duplicate or unknown). */
  acknowledge(ref: string): boolean {
    const waiter = this.waiters.get(ref);
    if (!waiter) return false;
    waiter.cancel();
    this.waiters.delete(ref);
    waiter.resolve();
    return true;
  }

  /** Ends the session for good: close frame, socket destroyed shortly after, waiters rejected, registry told. */
  teardown(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = { code, reason, at: Date.now() };
    this.idle.cancel();
    for (const [, waiter] of this.waiters) {
      waiter.cancel();
      waiter.reject(new SessionClosedError(code, reason));
    }
    this.waiters.clear();
    closeHard(this.socket, code, reason);
    this.onTeardown(this, code, reason);
  }

  get bufferedAmount(): number {
    return this.socket.bufferedAmount;
  }
}
