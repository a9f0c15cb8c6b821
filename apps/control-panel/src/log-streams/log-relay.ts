import type { Logger } from '@tether/common';
import { createIdGenerator, LOG_LIMITS, type LogLine, type LogsChunk, type LogsEnd } from '@tether/protocol';
import { AppError } from '../errors.js';
import type { AgentSession } from '../sessions/session.js';

// Log streams relayed from an agent's session to HTTP clients. The panel
// grants the agent credit (bytes of logs.chunk frames) only as fast as the
// HTTP client takes what came, and never faster than the per-stream rate, so
// a slow or stopped reader stops the agent (and the agent stops reading
// Docker). Every stream ends with a reason the client sees: the agent's
// logs.end, the session's end, or a protocol violation.

export interface LogRelayLimits {
  /** Streams open at once per node; more answer 429 LOG_STREAMS_EXHAUSTED. */
  streamsPerNode: number;
  /** Bytes per second a stream may carry (credit is paced to it). */
  bytesPerSecond: number;
  /** Credit the agent may hold plus bytes not yet taken by the HTTP client, per stream. */
  windowBytes: number;
}

export interface LogRequest {
  serviceId: string;
  tail: number | null;
  since: string | null;
  follow: boolean;
}

/** Where a stream's lines go (the HTTP response). */
export interface LogSink {
  /** Lines to write; call `taken()` once the client took them (written without backpressure, or drained). */
  lines(lines: LogLine[], taken: () => void): void;
  /** A notice that does not end the stream (the rate cap holds it back). */
  notice(code: string, reason: string): void;
  /** The stream ended; nothing comes after. */
  end(code: string, reason: string): void;
}

/** Codes of a stream's final line besides the agent's own (END_OF_LOGS, DOCKER_UNAVAILABLE, …). */
export const LOG_STREAM_END_CODES = Object.freeze({
  SESSION_ENDED: 'SESSION_ENDED',
  LOG_CREDIT_EXCEEDED: 'LOG_CREDIT_EXCEEDED',
  PANEL_STOPPING: 'PANEL_STOPPING',
  LOG_RATE_LIMITED: 'LOG_RATE_LIMITED',
  /** A stream through another panel (the node's owner) whose answer broke off (log-proxy.ts). */
  OWNER_PANEL_LOST: 'OWNER_PANEL_LOST',
  /** The panel ended the stream (not the agent): another team needed a place, or TETHER_LOG_FOLLOW_IDLE_MS passed. */
  LOG_STREAMS_EXHAUSTED: 'LOG_STREAMS_EXHAUSTED',
  LOG_FOLLOW_IDLE: 'LOG_FOLLOW_IDLE',
  LOG_KEEPALIVE: 'LOG_KEEPALIVE',
  /** The token that opened the stream was revoked (on this panel or another: http/held-streams.ts). */
  TOKEN_REVOKED: 'TOKEN_REVOKED',
});

/** The smallest credit grant worth a frame (keeps grants from trickling in tiny pieces). */
const MIN_GRANT = 16 * 1024;

export class RelayedStream {
  granted = 0;
  received = 0;
  /** Bytes the HTTP client took. */
  taken = 0;
  tokens: number;
  refilledAt = performance.now();
  timer: NodeJS.Timeout | undefined;
  throttled = false;
  ended = false;
  constructor(
    readonly id: string,
    readonly session: AgentSession,
    readonly sink: LogSink,
    windowBytes: number,
    /** The team of the service whose logs these are (each team keeps one stream per node). */
    readonly teamId: string,
  ) {
    this.tokens = windowBytes;
  }
}

export class LogRelay {
  private readonly streams = new Map<string, RelayedStream>();
  private readonly nextId = createIdGenerator('p');
  private readonly nextStreamId = createIdGenerator('log_');

  constructor(
    private readonly limits: LogRelayLimits,
    private readonly logger: Logger,
  ) {
    // A window smaller than one chunk would stall every stream.
    if (limits.windowBytes < LOG_LIMITS.maxChunkBytes) throw new Error(`log credit window must be at least ${LOG_LIMITS.maxChunkBytes} bytes`);
  }

  /** Streams open now, per node. */
  openOn(nodeId: string): number {
    let n = 0;
    for (const s of this.streams.values()) if (s.session.nodeId === nodeId) n++;
    return n;
  }

  get size(): number {
    return this.streams.size;
  }

  /**
   * Opens a stream on the node's live session. At the node's cap, a team that holds none of its streams still
   * gets one: the newest stream of the team holding the most (more than one) ends with LOG_STREAMS_EXHAUSTED
   * to make room, so no tenant can starve another of its logs. Otherwise throws LOG_STREAMS_EXHAUSTED.
   */
  open(session: AgentSession, request: LogRequest, sink: LogSink, teamId: string): RelayedStream {
    if (this.openOn(session.nodeId) >= this.limits.streamsPerNode) {
      const victim = this.makeRoomFor(session.nodeId, teamId);
      if (!victim) {
        throw new AppError('LOG_STREAMS_EXHAUSTED', `node ${session.nodeName} serves at most ${this.limits.streamsPerNode} log streams at once; try again when one ends`);
      }
      this.finish(victim, LOG_STREAM_END_CODES.LOG_STREAMS_EXHAUSTED, "ended to make room for another team's stream on this node (each team keeps one)", true);
    }
    const stream = new RelayedStream(this.nextStreamId(), session, sink, this.limits.windowBytes, teamId);
    this.streams.set(stream.id, stream);
    const credit = this.take(stream, this.limits.windowBytes);
    stream.granted = credit;
    session.send({ type: 'logs.open', id: this.nextId(), streamId: stream.id, ...request, credit });
    return stream;
  }

  /** The stream to end so `teamId`, holding none on the node, gets one: the newest of the team holding most. */
  private makeRoomFor(nodeId: string, teamId: string): RelayedStream | undefined {
    const byTeam = new Map<string, RelayedStream[]>();
    for (const s of this.streams.values()) {
      if (s.session.nodeId !== nodeId) continue;
      const list = byTeam.get(s.teamId) ?? [];
      list.push(s);
      byTeam.set(s.teamId, list);
    }
    if (byTeam.has(teamId)) return undefined;
    let most: RelayedStream[] = [];
    for (const list of byTeam.values()) if (list.length > most.length) most = list;
    return most.length > 1 ? most[most.length - 1] : undefined;
  }


  /** logs.chunk: lines for one of the session's streams. */
  chunkReceived(session: AgentSession, message: LogsChunk): void {
    const stream = this.streamOf(session, message.streamId);
    if (stream) this.chunk(stream, message);
  }

  /** logs.end: the agent ended one of the session's streams. */
  endReceived(session: AgentSession, message: LogsEnd): void {
    const stream = this.streamOf(session, message.streamId);
    if (stream) this.finish(stream, message.code, message.reason, false);
  }

  private streamOf(session: AgentSession, streamId: string): RelayedStream | undefined {
    const stream = this.streams.get(streamId);
    // A stream closed by the client may still have frames in flight; another session's id is not ours to serve.
    return stream && stream.session === session ? stream : undefined;
  }

  private chunk(stream: RelayedStream, message: LogsChunk): void {
    // The frame as the agent encoded it (decode kept its key order); already validated, so no encode().
    const bytes = Buffer.byteLength(JSON.stringify(message));
    stream.received += bytes;
    if (stream.received > stream.granted || bytes > LOG_LIMITS.maxChunkBytes) {
      this.logger.warn({ streamId: stream.id, node: stream.session.nodeName, bytes, received: stream.received, granted: stream.granted }, 'agent broke the log credit');
      const why = bytes > LOG_LIMITS.maxChunkBytes ? `a chunk of ${bytes} bytes (most: ${LOG_LIMITS.maxChunkBytes})` : 'more than the panel granted';
      return this.finish(stream, LOG_STREAM_END_CODES.LOG_CREDIT_EXCEEDED, `the agent sent ${why}; the stream was closed`, true);
    }
    stream.sink.lines(message.lines, () => {
      stream.taken += bytes;
      this.grant(stream);
    });
  }

  /** Grants more credit when the window has room, paced to the rate cap. */
  private grant(stream: RelayedStream): void {
    if (stream.ended || stream.timer) return;
    // Room: the window less what the agent may still send and what the client has not taken yet.
    const inFlight = stream.granted - stream.taken;
    const want = this.limits.windowBytes - inFlight;
    if (want < Math.min(MIN_GRANT, this.limits.windowBytes / 4)) return;
    const credit = this.take(stream, want);
    if (credit < Math.min(MIN_GRANT, want)) {
      if (!stream.throttled) {
        stream.throttled = true;
        stream.sink.notice(LOG_STREAM_END_CODES.LOG_RATE_LIMITED, `this stream is held to ${this.limits.bytesPerSecond} bytes/s; lines come later, none are lost while the container's log keeps them`);
      }
      const waitMs = Math.ceil(((Math.min(MIN_GRANT, want) - stream.tokens) / this.limits.bytesPerSecond) * 1000);
      stream.timer = setTimeout(() => {
        stream.timer = undefined;
        this.grant(stream);
      }, Math.max(1, waitMs));
      stream.tokens += credit;
      return;
    }
    stream.granted += credit;
    stream.session.send({ type: 'logs.credit', id: this.nextId(), streamId: stream.id, bytes: credit });
  }

  /** Takes up to `want` bytes from the stream's rate bucket (capacity: one window). */
  private take(stream: RelayedStream, want: number): number {
    const now = performance.now();
    stream.tokens = Math.min(this.limits.windowBytes, stream.tokens + ((now - stream.refilledAt) / 1000) * this.limits.bytesPerSecond);
    stream.refilledAt = now;
    const credit = Math.max(0, Math.min(want, Math.floor(stream.tokens), LOG_LIMITS.maxCreditBytes));
    stream.tokens -= credit;
    return credit;
  }

  /** The client left: the agent stops the stream. */
  close(stream: RelayedStream): void {
    if (stream.ended) return;
    this.drop(stream);
    stream.session.send({ type: 'logs.close', id: this.nextId(), streamId: stream.id });
  }

  /** Ends a stream from the panel's side (its token was revoked): the agent stops, the client gets the end line. */
  end(stream: RelayedStream, code: string, reason: string): void {
    this.finish(stream, code as LogsEnd['code'], reason, true);
  }

  /** Every stream of a session that ended ends with why. */
  sessionClosed(session: AgentSession, reason: string): void {
    for (const stream of [...this.streams.values()]) {
      if (stream.session === session) this.finish(stream, LOG_STREAM_END_CODES.SESSION_ENDED, `the node's session ended: ${reason}`, false);
    }
  }

  /** The panel stops: every stream ends with PANEL_STOPPING. */
  stop(): void {
    for (const stream of [...this.streams.values()]) this.finish(stream, LOG_STREAM_END_CODES.PANEL_STOPPING, 'the panel is stopping', true);
  }

  private finish(stream: RelayedStream, code: LogsEnd['code'], reason: string, tellAgent: boolean): void {
    if (stream.ended) return;
    this.drop(stream);
    if (tellAgent) stream.session.send({ type: 'logs.close', id: this.nextId(), streamId: stream.id });
    stream.sink.end(code, reason);
  }

  private drop(stream: RelayedStream): void {
    stream.ended = true;
    clearTimeout(stream.timer);
    this.streams.delete(stream.id);
  }
}
