// The fleet page's row as it travels to the browser. No imports: the page
// (apps/dashboard) type-checks against this file directly, so the two sides
// cannot drift apart. Times are ms since epoch on the panel's clock.

export type FleetState = 'reachable' | 'unreachable' | 'never_connected' | 'decommissioned';

/** Why a node is unreachable, in the words the page shows. */
export type UnreachableReason = 'idle timeout' | 'ACK timeout' | 'superseded' | 'closed';

export interface FleetRow {
  id: string;
  name: string;
  state: FleetState;
  /** Unreachable since (ms), null otherwise. */
  since: number | null;
  reason: UnreachableReason | null;
  /** The teardown's own words (for the tooltip and the node page). */
  reasonDetail: string | null;
  sessionId: string | null;
  connectedSince: number | null;
  lastFrameAt: number | null;
  heartbeatMs: number | null;
  missedAcks24h: number;
  services: { running: number | null; desired: number };
  runtime: { available: boolean; error: string | null } | null;
  reloadsToday: number;
  lastReloadReason: string | null;
  routing: { desiredHash: string | null; appliedHash: string | null; drifting: boolean };
}
