import type { ServerResponse } from 'node:http';
import { AppError, ERROR_CATALOG, type ErrorCode } from '../errors.js';
import { LOG_STREAM_END_CODES, type LogRequest } from './log-relay.js';

// A log stream for a node whose session another panel holds: this panel asks
// the owner over its internal surface and passes the answer on. The owner's
// refusals (404, 429, 501, 503) reach the customer as they are; a stream is
// copied line by line, and read from the owner only as fast as the customer
// takes it (each write waits for 'drain'), so the owner's relay sees a slow
// customer as a slow client and stops granting the agent credit: the credit
// model holds end to end, and this panel holds at most one chunk and one
// partial line per stream.

/** An owner's answer as the HTTP client gives it. */
export interface UpstreamLogs {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: AsyncIterable<Buffer> & { destroy(err?: Error): unknown };
}

/** The panels holding other nodes' sessions, as the log routes need them (cluster/ implements it; panel-routes.ts wires it). */
export interface RemoteLogs {
  /** Opens the stream on the panel holding the node's session; null when no other live panel holds it. */
  open(nodeId: string, request: LogRequest, signal: AbortSignal): Promise<{ panelId: string; upstream: UpstreamLogs } | null>;
}

/** Every answer of the internal surface carries this header: an answer without it is not from a panel that serves it. */
export const INTERNAL_HEADER = 'x-tether-internal';

/** A line longer than this from the owner ends the stream (the owner writes lines of at most one agent chunk). */
const MAX_PARTIAL_BYTES = 4 * 1024 * 1024;
const NEWLINE = 0x0a;
const END_PREFIX = Buffer.from('{"type":"end"');

/** The owner's refusal as this panel's own answer (the same code, status and message), or OWNER_PANEL_UNREACHABLE. */
export async function refusalOf(panelId: string, upstream: UpstreamLogs): Promise<AppError> {
  let text = '';
  try {
    for await (const chunk of upstream.body) {
      text += chunk.toString('utf8');
      if (text.length > 65_536) break;
    }
  } catch {
    /* what came is enough to decide */
  }
  upstream.body.destroy();
  const served = upstream.headers[INTERNAL_HEADER] === '1';
  let error: { code?: unknown; message?: unknown } | undefined;
  try {
    error = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown } }).error;
  } catch {
    error = undefined;
  }
  const code = typeof error?.code === 'string' && error.code in ERROR_CATALOG ? (error.code as ErrorCode) : undefined;
  // The customer's token was fine: a refusal of this panel's credentials is the owner being unreachable to it.
  if (!served || !code || code === 'UNAUTHORIZED' || code === 'FORBIDDEN') {
    const why = !served
      ? `it answered HTTP ${upstream.statusCode} outside its internal surface (stopping, or an older release without /internal/v1)`
      : `it answered HTTP ${upstream.statusCode}${code ? ` ${code}` : ''}`;
    return new AppError('OWNER_PANEL_UNREACHABLE', `panel ${panelId}, which holds the node's session, refused the log stream: ${why}`);
  }
  return new AppError(code, typeof error?.message === 'string' ? error.message : undefined);
}

/**
 * Copies the owner's stream to the customer with backpressure. Ends with the owner's last line, or with an
 * OWNER_PANEL_LOST end line when the owner's answer broke off; a customer who leaves aborts the owner's request.
 */
export async function pipeRemoteLogs(res: ServerResponse, panelId: string, upstream: UpstreamLogs, abort: AbortController): Promise<void> {
  if (abort.signal.aborted || res.destroyed) {
    upstream.body.destroy();
    return;
  }
  const type = upstream.headers['content-type'];
  res.writeHead(200, { 'content-type': typeof type === 'string' ? type : 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
  res.flushHeaders();
  const left = () => abort.abort();
  res.once('close', left);
  let partial: Buffer = Buffer.alloc(0);
  let lastLine: Buffer = Buffer.alloc(0);
  let broke: string | null = null;
  try {
    for await (const chunk of upstream.body) {
      const data = partial.length > 0 ? Buffer.concat([partial, chunk]) : chunk;
      // Only whole lines go on: a break-off never leaves half a JSON line before the end line.
      const cut = data.lastIndexOf(NEWLINE);
      if (cut < 0) {
        partial = data;
        if (partial.length > MAX_PARTIAL_BYTES) throw new Error(`a line longer than ${MAX_PARTIAL_BYTES} bytes`);
        continue;
      }
      const whole = data.subarray(0, cut + 1);
      partial = Buffer.from(data.subarray(cut + 1));
      lastLine = whole.subarray(whole.lastIndexOf(NEWLINE, cut - 1) + 1);
      if (!res.write(whole)) await drained(res);
      if (res.destroyed) return;
    }
    if (!lastLine.subarray(0, END_PREFIX.length).equals(END_PREFIX)) broke = 'its answer ended without an end line';
  } catch (err) {
    if (res.destroyed || abort.signal.aborted) return;
    broke = (err as { code?: string }).code ?? 'the connection broke';
  } finally {
    res.off('close', left);
  }
  if (broke) {
    res.end(`${JSON.stringify({ type: 'end', code: LOG_STREAM_END_CODES.OWNER_PANEL_LOST, reason: `panel ${panelId}, which holds the node's session, stopped answering: ${broke}` })}\n`);
  } else {
    res.end();
  }
}

/** Resolves when the customer took what was written, or left. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
  });
}
