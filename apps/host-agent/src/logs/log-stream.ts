import type { Readable } from 'node:stream';
import { errorMessage, isIdentifier } from '@tether/common';
import { FIELD_LIMITS, LOG_LIMITS, encode, type LogLine, type LogsOpen } from '@tether/protocol';
import type { LogSource, ServiceContainer } from './docker-logs.js';
import { compareTimes, dockerSince, LogFrameParser, type RawLogLine } from './log-lines.js';

// One log stream the panel opened: the service's history (the last `tail`
// lines over all its containers, merged by Docker's timestamp), then with
// `follow` every new line of every container of the service, including ones
// that start later (a redeploy's). Lines wait in a queue until the panel's
// credit lets them go; past `highWaterBytes` queued, the Docker log streams
// are paused, so a reader that stops reading stops Docker's stream too.

export interface LogStreamLimits {
  /** Queued bytes past which Docker's streams are paused. */
  highWaterBytes: number;
  /** Bytes of history (tail) one stream holds at most before it is sent. */
  backlogBytes: number;
}

export const DEFAULT_LOG_STREAM_LIMITS: LogStreamLimits = { highWaterBytes: 256 * 1024, backlogBytes: 4 * 1024 * 1024 };

/** Why a stream ended, as `logs.end` says it. */
export const LOG_END_CODES = Object.freeze({
  END_OF_LOGS: 'END_OF_LOGS',
  DOCKER_UNAVAILABLE: 'DOCKER_UNAVAILABLE',
  LOG_STREAMS_EXHAUSTED: 'LOG_STREAMS_EXHAUSTED',
  LOG_STREAM_FAILED: 'LOG_STREAM_FAILED',
});

interface Queued {
  line: LogLine;
  /** The line as JSON, made once: it sizes the line and goes into the frame as it is. */
  json: string;
  /** Its UTF-8 bytes plus the comma between lines. */
  bytes: number;
}

interface Reader {
  stream: Readable | null;
  /** Lines at or before this time were sent already (a restarted container's stream starts over). */
  lastTime: string | null;
  active: boolean;
}

/** A container's name when it is a valid protocol name, else its id (Docker's names always are; this never sends an invalid frame). */
const replicaName = (c: ServiceContainer) => (isIdentifier(c.name, FIELD_LIMITS.name) ? c.name : c.id);

export class LogStream {
  readonly id: string;
  private readonly queue: Queued[] = [];
  private head = 0;
  private queuedBytes = 0;
  private credit: number;
  private readonly readers = new Map<string, Reader>();
  private readonly abort = new AbortController();
  private paused = false;
  private ending: { code: string; reason: string } | null = null;
  private closed = false;

  constructor(
    private readonly open: LogsOpen,
    private readonly source: LogSource,
    private readonly limits: LogStreamLimits,
    /** Lines, credit or the end became available: the sender should look. */
    private readonly onReady: () => void,
  ) {
    this.id = open.streamId;
    this.credit = open.credit;
  }

  /** Bytes waiting for credit (what this stream holds in memory). */
  get bufferedBytes(): number {
    return this.queuedBytes;
  }

  async start(): Promise<void> {
    const startedAt = new Date().toISOString();
    const pending: ServiceContainer[] = [];
    let following = false;
    if (this.open.follow) {
      // Watch before listing, so a container that starts in between is not missed.
      void this.source.watchStarts(this.open.serviceId, (c) => (following ? this.follow(c) : pending.push(c)), this.abort.signal);
    }
    try {
      const containers = await this.source.containers(this.open.serviceId);
      const lastTimes = await this.history(containers);
      if (this.closed) return;
      if (!this.open.follow) {
        this.end(LOG_END_CODES.END_OF_LOGS, `${this.queue.length - this.head} lines from ${containers.length} containers`);
        return;
      }
      following = true;
      for (const c of containers) this.follow(c, lastTimes.get(c.id) ?? this.open.since ?? startedAt);
      for (const c of pending.splice(0)) this.follow(c);
    } catch (err) {
      if (!this.closed) this.end(LOG_END_CODES.DOCKER_UNAVAILABLE, `reading logs from Docker failed: ${errorMessage(err)}`);
    }
  }

  /** The last `tail` lines over all containers, merged by time; returns each container's last line time. */
  private async history(containers: ServiceContainer[]): Promise<Map<string, string>> {
    const tail = this.open.tail ?? LOG_LIMITS.maxTail;
    const lastTimes = new Map<string, string>();
    if (tail === 0 || containers.length === 0) return lastTimes;
    const perContainer = await Promise.all(
      containers.map(async (c) => {
        const lines = await this.readAll(c, tail, Math.floor(this.limits.backlogBytes / containers.length));
        const last = lines.at(-1);
        if (last) lastTimes.set(c.id, last.line.time);
        return lines;
      }),
    );
    // A stable merge by time: equal times keep their container's order.
    const merged = perContainer.flat().sort((a, b) => compareTimes(a.line.time, b.line.time));
    for (const q of merged.slice(Math.max(0, merged.length - tail))) this.push(q);
    return lastTimes;
  }

  /** A container's last `tail` lines (within `budget` bytes: the oldest are dropped first). */
  private async readAll(c: ServiceContainer, tail: number, budget: number): Promise<Queued[]> {
    const since = this.open.since ? dockerSince(this.open.since) : undefined;
    const stream = await this.source.open(c.id, { tail, ...(since ? { since } : {}), follow: false }, this.abort.signal);
    const parser = new LogFrameParser();
    const lines: Queued[] = [];
    let bytes = 0;
    for await (const chunk of stream) {
      for (const raw of parser.push(chunk as Buffer)) {
        const q = this.queued(c, raw);
        lines.push(q);
        bytes += q.bytes;
      }
      while (bytes > budget && lines.length > 1) bytes -= lines.shift()!.bytes;
    }
    return lines;
  }

  private queued(c: ServiceContainer, raw: RawLogLine): Queued {
    const line: LogLine = { containerId: c.id, replica: replicaName(c), stream: raw.stream, time: raw.time, text: raw.text };
    const json = JSON.stringify(line);
    return { line, json, bytes: Buffer.byteLength(json) + 1 };
  }

  /** Follows a container's new lines (after `from`, an RFC 3339 time, when given). */
  private follow(c: ServiceContainer, from?: string): void {
    if (this.closed) return;
    const known = this.readers.get(c.id);
    if (known?.active) return;
    const reader: Reader = { stream: null, lastTime: known?.lastTime ?? from ?? null, active: true };
    this.readers.set(c.id, reader);
    const since = reader.lastTime ? dockerSince(reader.lastTime) : undefined;
    this.source
      .open(c.id, { follow: true, ...(since ? { since } : {}) }, this.abort.signal)
      .then((stream) => {
        if (this.closed) return void stream.destroy();
        reader.stream = stream;
        const parser = new LogFrameParser();
        // `since` may re-deliver lines at the boundary: skip up to the last time already sent, then take everything.
        let skipUntil = reader.lastTime;
        stream.on('data', (chunk: Buffer) => {
          for (const raw of parser.push(chunk)) {
            if (skipUntil) {
              if (compareTimes(raw.time, skipUntil) <= 0) continue;
              skipUntil = null;
            }
            reader.lastTime = raw.time;
            this.push(this.queued(c, raw));
          }
          this.flowControl();
        });
        stream.once('close', () => {
          reader.active = false;
          reader.stream = null;
        });
        stream.on('error', () => undefined);
        if (this.paused) stream.pause();
      })
      .catch(() => {
        // The container went away before its logs could be read; a new start re-attaches.
        reader.active = false;
      });
  }

  private push(q: Queued): void {
    this.queue.push(q);
    this.queuedBytes += q.bytes;
    this.onReady();
  }

  private flowControl(): void {
    const over = this.queuedBytes > this.limits.highWaterBytes;
    if (over === this.paused) return;
    this.paused = over;
    for (const reader of this.readers.values()) {
      if (over) reader.stream?.pause();
      else reader.stream?.resume();
    }
  }

  grant(bytes: number): void {
    this.credit = Math.min(this.credit + bytes, LOG_LIMITS.maxCreditBytes);
    this.onReady();
  }

  private end(code: string, reason: string): void {
    this.ending = { code, reason };
    this.abort.abort();
    this.onReady();
  }

  /**
   * The next frame this stream may send now, encoded: a `logs.chunk` within
   * its credit and LOG_LIMITS.maxChunkBytes, or its `logs.end` once every line
   * went; null when it must wait. `done` is true after the end frame.
   */
  nextFrame(nextId: () => string): { frame: string; done: boolean } | null {
    if (this.closed) return null;
    if (this.head === this.queue.length) {
      if (!this.ending) return null;
      this.closed = true;
      return { frame: encode({ type: 'logs.end', id: nextId(), streamId: this.id, ...this.ending }), done: true };
    }
    const id = nextId();
    const budget = Math.min(this.credit, LOG_LIMITS.maxChunkBytes);
    // The frame with an empty array, then each line's JSON and a comma between lines.
    // JSON.stringify, not encode: encode validates, and a chunk without lines is not a valid message.
    let size = Buffer.byteLength(JSON.stringify({ type: 'logs.chunk', id, streamId: this.id, lines: [] }));
    let end = this.head;
    while (end < this.queue.length && end - this.head < LOG_LIMITS.maxChunkLines) {
      const next = size + this.queue[end]!.bytes - (end === this.head ? 1 : 0);
      if (next > budget) break;
      size = next;
      end += 1;
    }
    if (end === this.head) return null;
    const taken = this.queue.slice(this.head, end);
    this.head = end;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    // Built from the lines' JSON instead of encode(): no second serialisation and no schema pass per chunk at
    // tens of MB/s. Every field is valid by construction (ids and names from Docker, checked above; times from
    // the parser's pattern; text sanitised and cut to its bound), and the panel validates every frame anyway.
    const frame = `${JSON.stringify({ type: 'logs.chunk', id, streamId: this.id }).slice(0, -1)},"lines":[${taken.map((q) => q.json).join(',')}]}`;
    const bytes = Buffer.byteLength(frame);
    this.credit -= bytes;
    this.queuedBytes -= taken.reduce((n, q) => n + q.bytes, 0);
    this.flowControl();
    return { frame, done: false };
  }

  /** Stops everything (the panel closed the stream, or the session ended). */
  close(): void {
    this.closed = true;
    this.abort.abort();
    for (const reader of this.readers.values()) reader.stream?.destroy();
    this.readers.clear();
    this.queue.length = 0;
    this.head = 0;
    this.queuedBytes = 0;
  }
}
