import { sanitizeText } from '@tether/common';
import { FIELD_LIMITS } from '@tether/protocol';

// Docker's log stream of a container without a TTY is multiplexed: frames of
// an 8-byte header (stream 1 = stdout, 2 = stderr; size, big-endian) and a
// payload. With timestamps=1 each line starts with an RFC 3339 (nano) time and
// a space. This turns bytes as they arrive into lines, sanitised, each text at
// most FIELD_LIMITS.text code units (longer lines come in pieces).

export interface RawLogLine {
  stream: 'stdout' | 'stderr';
  /** Docker's RFC 3339 time of the line. */
  time: string;
  text: string;
}

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const SPACE = 0x20;
const NEWLINE = 0x0a;

/** Splits sanitised text into pieces of at most `max` code units, never between the halves of a surrogate pair. */
export function pieces(text: string, max: number = FIELD_LIMITS.text): string[] {
  if (text.length <= max) return [text];
  const out: string[] = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(start + max, text.length);
    const code = text.charCodeAt(end - 1);
    if (end < text.length && code >= 0xd800 && code <= 0xdbff) end -= 1;
    out.push(text.slice(start, end));
    start = end;
  }
  return out;
}

/** Incremental demultiplexer: push bytes, get complete lines. Holds at most one unfinished frame. */
export class LogFrameParser {
  private pending: Buffer = Buffer.alloc(0);
  /** The time of the last line, for a piece that carries none. */
  private lastTime = new Date(0).toISOString();

  push(chunk: Buffer): RawLogLine[] {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const lines: RawLogLine[] = [];
    let offset = 0;
    while (this.pending.length - offset >= 8) {
      const kind = this.pending[offset];
      const size = this.pending.readUInt32BE(offset + 4);
      if (this.pending.length - offset - 8 < size) break;
      const payload = this.pending.subarray(offset + 8, offset + 8 + size);
      offset += 8 + size;
      // Stream 0 (stdin) never carries output; anything but 1 and 2 is treated as stdout rather than lost.
      this.frame(kind === 2 ? 'stderr' : 'stdout', payload, lines);
    }
    this.pending = offset === 0 ? this.pending : Buffer.from(this.pending.subarray(offset));
    return lines;
  }

  /** Bytes held for an unfinished frame. */
  get buffered(): number {
    return this.pending.length;
  }

  private frame(stream: 'stdout' | 'stderr', payload: Buffer, out: RawLogLine[]): void {
    let start = 0;
    while (start < payload.length) {
      let end = payload.indexOf(NEWLINE, start);
      if (end === -1) end = payload.length;
      this.line(stream, payload.subarray(start, end), out);
      start = end + 1;
    }
  }

  private line(stream: 'stdout' | 'stderr', bytes: Buffer, out: RawLogLine[]): void {
    let body = bytes;
    const space = bytes.indexOf(SPACE);
    if (space > 0 && space <= 40) {
      const candidate = bytes.subarray(0, space).toString('latin1');
      if (TIMESTAMP.test(candidate)) {
        this.lastTime = candidate;
        body = bytes.subarray(space + 1);
      }
    }
    const text = sanitizeText(body);
    for (const piece of pieces(text)) out.push({ stream, time: this.lastTime, text: piece });
  }
}

/** Nanosecond-precise comparison of two RFC 3339 UTC times as Docker writes them. */
export function compareTimes(a: string, b: string): number {
  const [secA, fracA = ''] = a.replace(/Z$/, '').split('.');
  const [secB, fracB = ''] = b.replace(/Z$/, '').split('.');
  if (secA !== secB) return secA! < secB! ? -1 : 1;
  const fa = fracA.padEnd(9, '0');
  const fb = fracB.padEnd(9, '0');
  return fa === fb ? 0 : fa < fb ? -1 : 1;
}

/** Docker's `since` parameter (seconds since the epoch, with nanoseconds) for an RFC 3339 time. */
export function dockerSince(time: string): string {
  const ms = Date.parse(time);
  const seconds = Math.floor(ms / 1000);
  const frac = time.match(/\.(\d{1,9})/)?.[1]?.padEnd(9, '0') ?? '000000000';
  return `${seconds}.${frac}`;
}
