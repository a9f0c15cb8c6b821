import { open, stat, type FileHandle } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import { createLoop, truncate, type Logger, type Loop } from '@tether/common';
import { FIELD_LIMITS } from '@tether/protocol';

// Follows the issuance log Caddy writes (proxy/issuance-logging.ts: JSON
// lines of its tls.obtain, http.acme_client, tls.on_demand… loggers) and keeps,
// per domain, the last issuance error in the CA's words, cleared once Caddy
// logs a certificate obtained (or renewed) for that name. Pure parts first
// (the line parser, the per-domain state, the line splitter); the follower
// reads what was appended every poll, from the start of the file at start (it
// is bounded: rolled at 1 MiB), survives rotation (a new file at the path:
// the old one is read to its end first) and truncation, and skips lines that
// are not Caddy's JSON.

export interface IssuanceError {
  /** What the CA (or Caddy's issuer) said, as logged. */
  message: string;
  /** When Caddy logged it (ISO 8601). */
  at: string;
}

/** An issuance error as the route's certificate `lastError` says it (the one wording, docs/api.md). */
export function describeIssuanceError(e: IssuanceError): string {
  return truncate(`certificate issuance failed (${e.at}): ${e.message}`, FIELD_LIMITS.text);
}

export type IssuanceEvent =
  | { kind: 'attempt'; domain: string }
  | { kind: 'error'; domain: string; error: IssuanceError; rank: number }
  | { kind: 'obtained'; domain: string };

const str = (v: unknown) => (typeof v === 'string' && v.length > 0 ? v : null);

/** One log line as an issuance event; null for anything else (other messages, garbage). */
export function parseIssuanceLine(line: string): IssuanceEvent | null {
  let entry: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
    entry = parsed as Record<string, unknown>;
  } catch {
    return null;
  }
  const domain = str(entry.identifier)?.toLowerCase();
  const msg = str(entry.msg);
  if (!domain || !msg) return null;
  if (msg === 'obtaining certificate' || msg === 'renewing certificate') return { kind: 'attempt', domain };
  if (msg === 'certificate obtained successfully' || msg === 'certificate renewed successfully') return { kind: 'obtained', domain };
  const error = str(entry.error);
  if (entry.level !== 'error' || !error) return null;
  const at = typeof entry.ts === 'number' && Number.isFinite(entry.ts) ? new Date(entry.ts * 1000).toISOString() : new Date(0).toISOString();
  // The CA refusing a challenge is the cause; the issuer's summary afterwards ("no solvers available…") is not.
  if (msg === 'challenge failed') {
    const challenge = str(entry.challenge_type);
    const problem = str(entry.problem_type);
    const status = typeof entry.status_code === 'number' ? `HTTP ${entry.status_code} ` : '';
    const message = `challenge${challenge ? ` ${challenge}` : ''} failed: ${status}${problem ? `${problem} - ` : ''}${error}`;
    return { kind: 'error', domain, error: { message: truncate(message, FIELD_LIMITS.text), at }, rank: 2 };
  }
  if (msg === 'validating authorization') return { kind: 'error', domain, error: { message: truncate(error, FIELD_LIMITS.text), at }, rank: 2 };
  if (msg === 'could not get certificate from issuer' || msg === 'could not get certificate') {
    return { kind: 'error', domain, error: { message: truncate(error, FIELD_LIMITS.text), at }, rank: 1 };
  }
  return null;
}

/**
 * The last issuance error per domain. Within one attempt (from "obtaining certificate" on) the first error of
 * the highest rank stays: the challenge the CA refused, not the summaries that follow it. The previous
 * attempt's error stays visible until the next attempt logs one; a certificate obtained clears it.
 */
export class IssuanceErrors {
  private readonly errors = new Map<string, { error: IssuanceError; rank: number; fresh: boolean }>();
  private static readonly MAX_DOMAINS = 10_000;

  note(event: IssuanceEvent): void {
    const current = this.errors.get(event.domain);
    if (event.kind === 'obtained') {
      this.errors.delete(event.domain);
    } else if (event.kind === 'attempt') {
      if (current) current.fresh = true;
    } else if (!current || current.fresh || event.rank > current.rank) {
      if (!current && this.errors.size >= IssuanceErrors.MAX_DOMAINS) this.errors.delete(this.errors.keys().next().value!);
      this.errors.set(event.domain, { error: event.error, rank: event.rank, fresh: false });
    }
  }

  errorFor(domain: string): IssuanceError | null {
    return this.errors.get(domain.toLowerCase())?.error ?? null;
  }
}

/** Bytes → whole lines; a partial last line waits for its end; a line longer than `maxLine` is dropped. */
export class LineSplitter {
  private pending = '';
  private dropping = false;

  constructor(private readonly maxLine = 64 * 1024) {}

  push(chunk: string): string[] {
    const parts = (this.pending + chunk).split('\n');
    this.pending = parts.pop()!;
    const lines: string[] = [];
    for (const part of parts) {
      if (!this.dropping && part.length <= this.maxLine) lines.push(part);
      this.dropping = false;
    }
    if (this.pending.length > this.maxLine) {
      this.pending = '';
      this.dropping = true;
    }
    return lines;
  }

  reset(): void {
    this.pending = '';
    this.dropping = false;
  }
}

const CHUNK = 256 * 1024;

export interface IssuanceLogOptions {
  path: string;
  /** How often the file is read for what was appended. */
  pollMs: number;
  logger: Logger;
}

export class IssuanceLog {
  readonly errors = new IssuanceErrors();
  private readonly loop: Loop;
  private readonly lines = new LineSplitter();
  private file: { handle: FileHandle; ino: number; offset: number; decoder: StringDecoder } | null = null;

  constructor(private readonly options: IssuanceLogOptions) {
    this.loop = createLoop({
      name: 'issuance-log',
      intervalMs: options.pollMs,
      runImmediately: true,
      run: () => this.poll(),
      onError: (error) => options.logger.warn({ err: error, path: options.path }, 'reading the issuance log failed; retrying'),
    });
  }

  start(): void {
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    await this.file?.handle.close().catch(() => undefined);
    this.file = null;
  }

  errorFor(domain: string): IssuanceError | null {
    return this.errors.errorFor(domain);
  }

  /** Reads what was appended; follows the path to a new file once the old one is read to its end. */
  async poll(): Promise<void> {
    if (this.file) await this.drain();
    const now = await stat(this.options.path).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return null;
      throw error;
    });
    if (now === null || (this.file && this.file.ino === now.ino)) return;
    await this.file?.handle.close().catch(() => undefined);
    this.file = null;
    this.lines.reset();
    const handle = await open(this.options.path, 'r');
    this.file = { handle, ino: (await handle.stat()).ino, offset: 0, decoder: new StringDecoder('utf8') };
    await this.drain();
  }

  private async drain(): Promise<void> {
    const file = this.file!;
    const { size } = await file.handle.stat();
    if (size < file.offset) {
      // Truncated in place: start over.
      file.offset = 0;
      file.decoder = new StringDecoder('utf8');
      this.lines.reset();
    }
    const buffer = Buffer.alloc(CHUNK);
    while (file.offset < size) {
      const { bytesRead } = await file.handle.read(buffer, 0, Math.min(CHUNK, size - file.offset), file.offset);
      if (bytesRead === 0) break;
      file.offset += bytesRead;
      for (const line of this.lines.push(file.decoder.write(buffer.subarray(0, bytesRead)))) {
        const event = parseIssuanceLine(line);
        if (event) this.errors.note(event);
      }
    }
  }
}
