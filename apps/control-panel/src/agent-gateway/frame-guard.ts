import { performance } from 'node:perf_hooks';
import type { RawData } from 'ws';
import {
  FIELD_LIMITS,
  FRAME_ERROR_CODES,
  MAX_ERROR_REPLIES_PER_SECOND,
  MAX_FRAME_BYTES,
  MAX_INVALID_BYTES_PER_SECOND,
  MESSAGE_TYPES,
  type FrameError,
} from '@tether/protocol';

// What keeps one hostile session from costing the others anything: frames of
// a type the panel does not take are refused before they are parsed; error
// replies are rate-limited; and a session that keeps sending rejected bytes is
// not read until its budget refills (TCP then holds its sender back). The
// limits are protocol constants, documented in docs/protocol.md.

/** Each rejected frame counts at least this many bytes against the read budget (a flood of tiny frames costs too). */
const MIN_REJECTED_COST = 1024;
/** Longest single pause; a session still over budget is paused again. */
const MAX_PAUSE_MS = 1_000;

const PROTOCOL_TYPES: ReadonlySet<string> = new Set(MESSAGE_TYPES);
// `{"type":"…","id":"…"`: how every encoder of this protocol starts a frame (JSON.stringify keeps key order).
const HEAD = /^\s*\{\s*"type"\s*:\s*"([^"\\]{0,64})"(?:\s*,\s*"id"\s*:\s*"([\x21\x23-\x5b\x5d-\x7e]{1,128})")?/;

/** A bucket of `capacity` tokens refilled at `perSecond`, on a monotonic clock. */
export class TokenBucket {
  private tokens: number;
  private at: number;

  constructor(
    private readonly capacity: number,
    private readonly perSecond: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.tokens = capacity;
    this.at = now();
  }

  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.capacity, this.tokens + ((t - this.at) * this.perSecond) / 1000);
    this.at = t;
  }

  /** Takes `n` tokens when there are that many. */
  take(n = 1): boolean {
    this.refill();
    if (this.tokens < n) return false;
    this.tokens -= n;
    return true;
  }

  /** Takes `n` tokens, into debt if need be; returns the ms until the debt is paid (0: none). */
  spend(n: number): number {
    this.refill();
    this.tokens -= n;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens * 1000) / this.perSecond);
  }
}

/** The byte length of a frame as ws hands it over. */
export function frameBytes(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((n, b) => n + b.length, 0);
  return data instanceof ArrayBuffer ? data.byteLength : data.length;
}

/**
 * Refuses, without parsing, a frame of an established session whose leading
 * `type` is not one the panel takes from an agent (UNKNOWN_TYPE or
 * UNEXPECTED_MESSAGE, `ref` from a leading `id`). Null: decode it.
 */
export function refuseByHead(data: RawData, isBinary: boolean, accepted: ReadonlySet<string>): FrameError | null {
  if (isBinary || !Buffer.isBuffer(data) || data.length > MAX_FRAME_BYTES) return null; // decode answers these first, cheaply
  const head = HEAD.exec(data.toString('latin1', 0, 256));
  if (!head) return null;
  const type = head[1]!;
  if (accepted.has(type)) return null;
  const id = head[2];
  const ref = id && id.length <= FIELD_LIMITS.id ? id : null;
  if (!PROTOCOL_TYPES.has(type)) return { code: FRAME_ERROR_CODES.UNKNOWN_TYPE, message: `unknown message type "${type}"`, ref };
  return { code: FRAME_ERROR_CODES.UNEXPECTED_MESSAGE, message: `${type} is not accepted from an agent here`, ref };
}

/** Per connection: the error-reply budget and the rejected-bytes read budget. */
export class FrameGuard {
  private readonly replies: TokenBucket;
  private readonly reads: TokenBucket;
  private pausedUntil = 0;
  /** Rejected frames that got no reply (over MAX_ERROR_REPLIES_PER_SECOND). */
  unanswered = 0;

  constructor(now?: () => number) {
    this.replies = new TokenBucket(MAX_ERROR_REPLIES_PER_SECOND, MAX_ERROR_REPLIES_PER_SECOND, now);
    this.reads = new TokenBucket(MAX_INVALID_BYTES_PER_SECOND, MAX_INVALID_BYTES_PER_SECOND, now);
  }

  /** A frame was rejected: whether it may be answered. */
  mayReply(): boolean {
    if (this.replies.take()) return true;
    this.unanswered++;
    return false;
  }

  /** A frame of `bytes` was rejected: how long to stop reading this session (0: keep reading). */
  rejected(bytes: number): number {
    return Math.min(MAX_PAUSE_MS, this.reads.spend(Math.max(bytes, MIN_REJECTED_COST)));
  }
}
