import type { RemoteReport } from '../sessions/remote-report.js';
import type { AgentSession } from '../sessions/session.js';
import type { SessionRegistry } from '../sessions/registry.js';

// Where a node's state is decided: once, for every presenter (REST session
// rows and status, the fleet page, the per-node metrics). A node is
// `connected` only while a live session proves it: this panel's own (while
// it holds its lease), or another panel's whose lease is live. Nothing else
// (a flag, a row, a timestamp) may say so; the database's facts only say who
// exists and why it last went away.
//
// One word per state in here. The REST API says `connected` and the fleet
// page says `reachable` for the same thing (documented wire words): each
// presenter maps `connected` to its own.

export type NodeState = 'connected' | 'unreachable' | 'never_connected' | 'decommissioned';

/** What the database says of a node (times in ms since epoch), as the node directory holds it. */
export interface NodeFacts {
  id: string;
  name: string;
  decommissioned: boolean;
  lastSeenAt: number | null;
  unreachableSince: number | null;
  lastTeardownAt: number | null;
  lastTeardownReason: string | null;
  /** Close code of the last non-superseded teardown as persisted; null when unknown. */
  lastCloseCode: number | null;
}

/** Several panels on one database: this panel's lease, and a node's live session on another panel. */
export interface ClusterProof {
  panelId: string;
  /** False: this panel cannot prove its own sessions (no lease, and another panel may own them). */
  leaseHeld: boolean;
  /** The node's session on another panel whose lease is live and whose claim is current; undefined otherwise. */
  elsewhere(nodeId: string): RemoteReport | undefined;
}

export interface HealthSources {
  registry: Pick<SessionRegistry, 'get' | 'lastTeardown'>;
  cluster?: ClusterProof;
}

export interface Teardown {
  at: number;
  reason: string | null;
  /** Close code; null when only the database's row is known and it did not keep one. */
  code: number | null;
}

export interface NodeHealth {
  state: NodeState;
  /** This panel's own session proving `connected`; null otherwise. */
  local: AgentSession | null;
  /** Another panel's session proving `connected` (its report); null otherwise. */
  remote: RemoteReport | null;
  /** Several panels: this panel holds no lease, so its own sessions prove nothing. */
  leaseLost: boolean;
  /** The last teardown this panel saw, else the database's; null before any. */
  teardown: Teardown | null;
  /** Unreachable since (state `unreachable` only). */
  unreachableSince: number | null;
}

export function nodeHealth(node: NodeFacts, src: HealthSources): NodeHealth {
  const leaseLost = src.cluster !== undefined && !src.cluster.leaseHeld;
  const local = node.decommissioned || leaseLost ? undefined : src.registry.get(node.id);
  const remote = local || node.decommissioned ? undefined : src.cluster?.elsewhere(node.id);
  const seen = src.registry.lastTeardown(node.id);
  const teardown: Teardown | null = seen
    ? { at: seen.at, reason: seen.reason, code: seen.code }
    : node.lastTeardownAt !== null
      ? { at: node.lastTeardownAt, reason: node.lastTeardownReason, code: node.lastCloseCode }
      : null;
  let state: NodeState;
  if (node.decommissioned) state = 'decommissioned';
  else if (local || remote) state = 'connected';
  else if (teardown || node.lastSeenAt !== null || node.unreachableSince !== null) state = 'unreachable';
  else state = 'never_connected';
  return {
    state,
    local: local ?? null,
    remote: remote ?? null,
    leaseLost,
    teardown,
    unreachableSince: state === 'unreachable' ? (seen?.at ?? node.unreachableSince ?? node.lastTeardownAt) : null,
  };
}

/** A cluster's view for one read (status and session rows): another panel's report counts only while it proves a live session. */
export function clusterProof(view: { panelId: string; leaseHeld: boolean; remote: ReadonlyMap<string, RemoteReport> }): ClusterProof {
  return {
    panelId: view.panelId,
    leaseHeld: view.leaseHeld,
    elsewhere: (nodeId) => {
      const r = view.remote.get(nodeId);
      return r && r.live && r.state === 'connected' && r.panelId !== view.panelId ? r : undefined;
    },
  };
}

/** A node row of the database (Prisma's Dates) as facts. */
export function factsOf(row: {
  id: string;
  name: string;
  decommissioned: boolean;
  lastSeenAt: Date | null;
  unreachableSince: Date | null;
  lastTeardownAt: Date | null;
  lastTeardownReason: string | null;
}): NodeFacts {
  return {
    id: row.id,
    name: row.name,
    decommissioned: row.decommissioned,
    lastSeenAt: row.lastSeenAt?.getTime() ?? null,
    unreachableSince: row.unreachableSince?.getTime() ?? null,
    lastTeardownAt: row.lastTeardownAt?.getTime() ?? null,
    lastTeardownReason: row.lastTeardownReason,
    lastCloseCode: null,
  };
}
