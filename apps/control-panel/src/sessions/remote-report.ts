import type { ContainerState, RoutingStatus, RuntimeStatus } from '@tether/protocol';

// A node's session as another panel holds it (several panels on one
// database): the owner's report row (cluster/node-reports.ts), read by
// status and session health on every panel.

export interface RemoteReport {
  nodeId: string;
  panelId: string;
  sessionId: string;
  generation: number;
  state: 'connected' | 'closed';
  lastFrameAt: number;
  updatedAt: number;
  containers: ContainerState[];
  runtime: RuntimeStatus | null;
  routing: RoutingStatus | null;
  /** Session counters and identity as the owner last wrote them. */
  extra: { peer: string | null; agentVersion: string | null; openedAt: number | null; heartbeats: number; missedAcks: number };
  /** The owner's lease is live and this row is of the node's current claim. */
  live: boolean;
  /** Where the owner is reached (its lease row), null when it has none. */
  internalUrl: string | null;
  /**
   * `owner`: the owning panel answered just now (live-report.ts); `report-row`: the row it last wrote (it
   * did not answer, or was not asked), whose frame age may be up to the row's refresh (10 s) older.
   */
  source: 'owner' | 'report-row';
  /** Counters only the owner's live answer carries. */
  session?: { lastHeartbeatSeq: number | null; pingsSent: number; pongs: number; invalidFrames: number };
}

/**
 * Where a node's session is proved when several panels share the database: this panel's own sessions count
 * only while it holds its lease; another panel's report only while that panel's lease is live.
 */
export interface ClusterView {
  panelId: string;
  leaseHeld: boolean;
  remote: ReadonlyMap<string, RemoteReport>;
}
