import type { Logger } from '@tether/common';
import { encode, type LogsClose, type LogsCredit, type LogsOpen } from '@tether/protocol';
import type { LogSource } from './docker-logs.js';
import { DEFAULT_LOG_STREAM_LIMITS, LOG_END_CODES, LogStream, type LogStreamLimits } from './log-stream.js';

// The agent's log streams (capability `logs`) and the one sender they share.
// The sender keeps at most one chunk written to the session and not yet
// handed to the kernel: the next chunk goes only when the WebSocket says the
// previous one was written. Heartbeats, pongs, ACKs and results are sent
// directly, so they wait behind at most that one chunk. Streams take turns.

/** Where the sender writes: the session's socket. */
export interface LogChannel {
  /** Sends one encoded frame; `onWritten` runs once it left the process (or failed). False when the socket is not open. */
  send(frame: string, onWritten: (err?: Error) => void): boolean;
  nextId(): string;
}

export interface LogStreamsOptions {
  source: LogSource;
  logger: Logger;
  /** Streams open at once on this agent; more are refused with LOG_STREAMS_EXHAUSTED. */
  maxStreams?: number;
  limits?: LogStreamLimits;
}

export const DEFAULT_MAX_LOG_STREAMS = 64;

export class LogStreams {
  private readonly streams = new Map<string, LogStream>();
  private order: string[] = [];
  private turn = 0;
  private channel: LogChannel | null = null;
  private inFlight = false;

  constructor(private readonly options: LogStreamsOptions) {}

  /** Streams open now. */
  get size(): number {
    return this.streams.size;
  }

  /** Bytes all streams hold waiting for credit. */
  get bufferedBytes(): number {
    let total = 0;
    for (const s of this.streams.values()) total += s.bufferedBytes;
    return total;
  }

  /** A session that speaks `logs` is ready. */
  attach(channel: LogChannel): void {
    this.detach();
    this.channel = channel;
  }

  /** The session ended: every stream stops (the panel ends its side itself). */
  detach(): void {
    this.channel = null;
    this.inFlight = false;
    for (const stream of this.streams.values()) stream.close();
    this.streams.clear();
    this.order = [];
  }

  /** logs.open: a new stream, refused with logs.end past the cap or for an id in use. */
  open(message: LogsOpen): void {
    this.openStream(message);
  }

  /** logs.credit: the panel took bytes off the stream; that much more may be sent. */
  credit(message: LogsCredit): void {
    this.streams.get(message.streamId)?.grant(message.bytes);
  }

  /** logs.close: the panel's reader left. */
  close(message: LogsClose): void {
    this.remove(message.streamId);
  }

  private openStream(message: LogsOpen): void {
    const channel = this.channel;
    if (!channel) return;
    const max = this.options.maxStreams ?? DEFAULT_MAX_LOG_STREAMS;
    if (this.streams.has(message.streamId) || this.streams.size >= max) {
      const reason = this.streams.has(message.streamId) ? `stream ${message.streamId} is open already` : `this agent streams at most ${max} logs at once`;
      channel.send(encode({ type: 'logs.end', id: channel.nextId(), streamId: message.streamId, code: LOG_END_CODES.LOG_STREAMS_EXHAUSTED, reason }), () => undefined);
      return;
    }
    const stream = new LogStream(message, this.options.source, this.options.limits ?? DEFAULT_LOG_STREAM_LIMITS, () => this.pump());
    this.streams.set(stream.id, stream);
    this.order.push(stream.id);
    this.options.logger.debug({ streamId: stream.id, serviceId: message.serviceId, follow: message.follow }, 'log stream opened');
    void stream.start();
  }

  private remove(streamId: string): void {
    const stream = this.streams.get(streamId);
    if (!stream) return;
    stream.close();
    this.streams.delete(streamId);
    this.order = this.order.filter((id) => id !== streamId);
  }

  /** Sends the next frame of the next stream that has one, unless a chunk is still being written. */
  private pump(): void {
    const channel = this.channel;
    if (this.inFlight || !channel) return;
    for (let i = 0; i < this.order.length; i += 1) {
      const index = (this.turn + i) % this.order.length;
      const id = this.order[index]!;
      let next: ReturnType<LogStream['nextFrame']>;
      try {
        next = this.streams.get(id)?.nextFrame(() => channel.nextId()) ?? null;
      } catch (err) {
        // Container output is input: a frame that does not encode ends its stream, never the agent.
        this.options.logger.warn({ err, streamId: id }, 'log stream failed');
        this.remove(id);
        channel.send(encode({ type: 'logs.end', id: channel.nextId(), streamId: id, code: LOG_END_CODES.LOG_STREAM_FAILED, reason: 'a log chunk could not be encoded' }), () => undefined);
        continue;
      }
      if (!next) continue;
      this.turn = index + 1;
      if (next.done) this.remove(id);
      this.inFlight = true;
      const sent = channel.send(next.frame, () => {
        if (this.channel !== channel) return;
        this.inFlight = false;
        // Not re-entrant: the next chunk is decided after this callback returns.
        setImmediate(() => this.pump());
      });
      if (!sent) this.inFlight = false;
      return;
    }
  }
}
