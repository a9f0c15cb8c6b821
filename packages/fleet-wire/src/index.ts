// What the panel sends the fleet page, as it travels: the panel's presenters
// (dashboard/fleet-rows.ts, fleet-feed.ts, http/dashboard.ts) are typed with
// these, and the page (apps/dashboard) reads them, so the two sides cannot
// drift apart and neither app imports the other's source. Types only, no
// imports. Times are ms since epoch on the panel's clock.

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
  /** `unhealthy`: containers whose health check fails now (absent from older panels). */
  services: { running: number | null; desired: number; unhealthy?: number };
  runtime: { available: boolean; error: string | null } | null;
  reloadsToday: number;
  lastReloadReason: string | null;
  routing: { desiredHash: string | null; appliedHash: string | null; drifting: boolean };
  /**
   * The node's routes as its live session's last probes read them (route health): how many serve, fail, and
   * have a certificate error. Absent without a live session that probes, and from older panels.
   */
  routes?: { serving: number; failing: number; certificateErrors: number };
  /**
   * Its allocations (replicas of services managed by allocations placed on it, run and stop), and when the newest
   * status among them was recorded (ms; null: none reported), from the node directory (absent from older panels).
   */
  allocations?: { count: number; lastStatusAt: number | null };
  /** Cordoned: the node gets no new placements (absent from older panels). */
  cordoned?: boolean;
  /** Cordoned and being emptied: its replicas move to other nodes one at a time (absent from older panels). */
  evacuating?: boolean;
  /** When an operator declared its host lost (ms; the node is decommissioned then); null: never (absent from older panels). */
  lostAt?: number | null;
  /** The node's labels, which a service's placement can require (absent from older panels). */
  labels?: Record<string, string>;
}

/** The `snapshot` event of the fleet stream: every row, as of `now`. */
export interface Snapshot {
  now: number;
  rows: FleetRow[];
}

/**
 * The `changes` event: rows that changed, the new last-frame time of rows
 * whose only change is that (`frames`, by node id), and nodes gone.
 */
export interface Changes {
  now: number;
  rows: FleetRow[];
  frames: Record<string, number | null>;
  removed: string[];
}

/** `GET /dashboard/api/nodes/:id`: one node's row, its recent sessions and reloads, its services' status. */
export interface NodeDetail {
  now: number;
  row: FleetRow;
  sessions: { sessionId: string; kind: 'opened' | 'closed'; at: number; reason: string | null; closeCode: number | null }[];
  reloads: { at: number; hashBefore: string | null; hashAfter: string; reason: string }[];
  services: {
    serviceId: string;
    name: string;
    state: string;
    desiredReplicas: number;
    runningReplicas: number | null;
    reason: string;
    containers: { name: string; state: string; health: string; restartCount: number; since: string }[];
    evidence: { sessionId: string; lastFrameAgeMs: number; reportAgeMs: number } | null;
    /** The service's routes with their health and certificate (absent from older panels). */
    routes?: RouteView[];
  }[];
  /**
   * The node's allocations (replicas of services managed by allocations placed here), as the status API presents
   * them: at most `shown` of them, by service name, and how many more there are (absent from older panels).
   */
  allocations?: { items: AllocationView[]; more: number };
}

/** One replica on the node: an entry of its service's status (`allocations[]`, docs/api.md, "Status per replica"). */
export interface AllocationView {
  allocationId: string;
  serviceId: string;
  service: string;
  /** run: one of the service's replicas; stop: being drained and removed. */
  desired: 'run' | 'stop';
  /** The status API's word: pending, starting, running, failed, draining, removed or unknown. */
  state: string;
  /** The release (deployment id) it must run; null: the service has none yet. */
  deploymentId: string | null;
  /** The release its serving container runs; null: none serves, or not reported. */
  runningDeploymentId: string | null;
  health: string | null;
  code: string | null;
  reason: string | null;
  /** When it was placed (ms). */
  placedAt: number;
  /** How old its node's last report of it is; null: never reported. */
  statusAgeMs: number | null;
  /** Placed by failover in place of a lost node's replica: the status API's `movedFrom.message`; null otherwise. */
  movedFrom: string | null;
}

/** A route as the node page shows it: GET /v1/routes/:id's health and certificate (docs/api.md, "Route health"). */
export interface RouteView {
  id: string;
  domain: string;
  pathPrefix: string | null;
  health: {
    state: string;
    reason: string;
    /** The probe the state is read from: every field is shown (an agent may add some). */
    evidence: ({ at: string; status: number | null; madeBy: string; error: string | null; latencyMs: number; sessionId: string } & Record<string, unknown>) | null;
  };
  certificate: { issuer: string | null; notBefore: string | null; notAfter: string | null; serial: string | null; lastError: string | null } | null;
}
