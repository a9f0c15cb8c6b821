import type { CanaryDropCause } from '@tether/protocol';
import type { ReloadRecord } from '../proxy/configurator.js';

// Why did the canary drop? Only causes the agent itself knows are named: a
// reload it made (the drop falls inside that load), a restarted Caddy (an
// empty Caddy was repaired, or a new one created, after the drop), Caddy not
// answering at all while the canary tried to come back, or else unexplained.

/** A drop falls inside a load from its start until its answer, with this much slack either side. */
export const LOAD_SLACK_MS = 1_000;

export interface DropEvidence {
  /** When the canary saw the drop (ms since epoch). */
  at: number;
  /** When the dropped connection had opened: nothing before it can explain its drop. */
  openedAt: number;
  /** Reloads the controller made, oldest first (a short recent window). */
  reloads: readonly ReloadRecord[];
  /** Reconnect attempts that found nothing answering on Caddy's canary port (refused, reset, timed out). */
  unreachableAttempts: number;
}

export function attributeDrop(e: DropEvidence): { cause: CanaryDropCause; reloadReason: string | null } {
  // A load that replaced a running config closes every proxied connection while it happens.
  const since = e.reloads.filter((r) => r.at.getTime() >= e.openedAt);
  const during = since.find(
    (r) => (r.kind === 'change' || r.kind === 'repair-drift') && r.startedAt.getTime() - LOAD_SLACK_MS <= e.at && e.at <= r.at.getTime() + LOAD_SLACK_MS,
  );
  if (during) return { cause: 'reload', reloadReason: during.reason };
  // Caddy came back empty (restart, crash) or was created anew, and the agent loaded it after the drop:
  // the restart dropped the connection first, the repair comes later.
  const restarted = since.find((r) => (r.kind === 'repair-empty' || r.kind === 'initial') && r.at.getTime() >= e.at);
  if (restarted) return { cause: 'proxy-restarted', reloadReason: null };
  if (e.unreachableAttempts > 0) return { cause: 'proxy-unreachable', reloadReason: null };
  return { cause: 'unexplained', reloadReason: null };
}
