// The retry hint a panel puts in the reason of a SERVICE_RESTART close
// (docs/protocol.md, "Close codes"): how wide a window the agent should
// spread its reconnects over. It lives in the close reason, free text an
// older agent logs and ignores, so the protocol stays compatible both ways:
// an agent that does not parse it reconnects with its ordinary backoff, and
// an agent that does copes with a panel that never sends one.

/** Bounds of a hinted window: anything outside is ignored as not a hint (a close reason is at most 123 bytes). */
export const RETRY_HINT_BOUNDS_MS = Object.freeze({ min: 100, max: 300_000 });

const HINT = /(?:^|[\s;])retry-window-ms=(\d{1,9})(?:$|[\s;])/;

/** The close reason of a planned restart: readable text plus the machine-read hint. */
export function formatRetryHint(windowMs: number, text = 'panel shutting down'): string {
  const ms = Math.min(Math.max(Math.round(windowMs), RETRY_HINT_BOUNDS_MS.min), RETRY_HINT_BOUNDS_MS.max);
  return `${text}; retry-window-ms=${ms}`;
}

/** The hinted window in ms, or null when the reason holds no valid hint. */
export function parseRetryHint(reason: string): number | null {
  const m = HINT.exec(reason);
  if (!m) return null;
  const ms = Number(m[1]);
  return ms >= RETRY_HINT_BOUNDS_MS.min && ms <= RETRY_HINT_BOUNDS_MS.max ? ms : null;
}
