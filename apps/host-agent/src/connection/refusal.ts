import type { IncomingMessage } from 'node:http';
import type WebSocket from 'ws';
import type { Backoff, Logger } from '@tether/common';
import { DECOMMISSIONED_REFUSAL_CODE } from '@tether/protocol';

// The body of a refused upgrade (`{ "error": { "code", "message" } }`, the
// panel's API shape): its code, read within a small bound of bytes and time,
// or undefined when it is not there (an older panel, a proxy in between).

const MAX_BYTES = 8 * 1024;
const MAX_WAIT_MS = 2_000;

export function refusalCode(res: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (code: string | undefined) => {
      clearTimeout(timer);
      res.removeAllListeners('data');
      res.resume();
      resolve(code);
    };
    const timer = setTimeout(() => done(undefined), MAX_WAIT_MS);
    timer.unref();
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BYTES) return done(undefined);
      chunks.push(chunk);
    });
    res.on('error', () => done(undefined));
    res.on('end', () => {
      try {
        const code = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code?: unknown } }).error?.code;
        done(typeof code === 'string' ? code : undefined);
      } catch {
        done(undefined);
      }
    });
  });
}

/**
 * A refused upgrade (an HTTP answer instead of 101): the socket is ended, the backoff takes a retry hint, and the
 * answer says how to go on: `terminal` (401 unknown token, 403 decommissioned: an operator must act; keep trying,
 * but slowly) and `refused` (503: a panel down, stopping or shedding rather than past its pace).
 */
export function refusedUpgrade(
  res: IncomingMessage,
  socket: WebSocket,
  deps: { logger: Logger; backoff: Backoff; decommissioned: (how: string) => void },
): { terminal: boolean; refused: boolean } {
  const status = res.statusCode;
  const terminal = status === 401 || status === 403;
  // A busy or restarting panel names when to come back (docs/protocol.md, "Retry hint"): a window to spread
  // over, or, for an agent already on a hinted schedule, the next delay only (the schedule goes on after it).
  const retryAfterS = status === 503 ? Number(res.headers['retry-after']) : NaN;
  if (Number.isInteger(retryAfterS) && retryAfterS > 0) {
    if (deps.backoff.isHinted) deps.backoff.retryAfter(retryAfterS * 1_000);
    else deps.backoff.hint(retryAfterS * 1_000);
  }
  if (status !== 403) {
    deps.logger.error({ status }, terminal ? 'panel refused this node token' : 'panel refused the upgrade');
    res.resume();
    socket.terminate();
    return { terminal, refused: status === 503 };
  }
  // 403: the body's code tells a decommissioned node (its agent stops what it runs) from any other refusal.
  void refusalCode(res).then((code) => {
    const decommissioned = code === DECOMMISSIONED_REFUSAL_CODE;
    deps.logger[decommissioned ? 'warn' : 'error']({ status, code }, `panel refused this node token${decommissioned ? ': the node is decommissioned' : ''}`);
    if (decommissioned) deps.decommissioned(`upgrade refused: 403 ${code}`);
    socket.terminate();
  });
  return { terminal, refused: false };
}
