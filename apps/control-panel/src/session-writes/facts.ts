// Session facts: what the agent side records in PostgreSQL. Every fact goes
// through the one ordered writer (outbox.ts): durable facts are kept in order
// and never dropped (they spill to a file while the database refuses them);
// last-seen and token last-used times are coalesced and may be dropped.
// Times are ISO strings so a fact survives the spill file unchanged. Each
// durable fact is idempotent: applied twice, it leaves one row.
//
// Several panels on one database (issue 10): a session's opens and closes
// carry the generation its panel claimed, and the node row is only touched
// while that generation is the node's current one (same statement).

import type { AuditRow } from '../audit/audit-entry.js';
import type { AllocationDrainReport } from '../db/managed-drains.js';

export type DeploymentTerminal = 'unreachable' | 'ack_timeout' | 'failed' | 'running';

export type DurableFact =
  /**
   * capabilities: what both ends agreed at the open (recorded on the node row, fenced like the rest of it);
   * absent in facts spilled by an older panel: the row keeps what it had. privateAddress: hello's, when the
   * session agreed routing.remote (written with the capabilities; null clears it). challengePort: hello's, when it
   * agreed certificates.share (the same way). fence: hello's, when it agreed workload.fence (the same way).
   */
  | {
      kind: 'session.opened';
      nodeId: string;
      sessionId: string;
      at: string;
      generation?: number;
      capabilities?: string[];
      privateAddress?: string | null;
      challengePort?: number | null;
      fence?: { afterMs: number; stopTimeoutMs: number } | null;
    }
  | {
      kind: 'session.closed';
      nodeId: string;
      sessionId: string;
      code: number | null;
      reason: string;
      at: string;
      lastFrameAt: string;
      /** Superseded by a newer session of the same node: the node stays reachable. */
      superseded: boolean;
      /** The claim's generation (absent in facts spilled by an older panel: unfenced, as before). */
      generation?: number;
    }
  /** Sessions a previous run of the panel left open (killed, crashed): closed at their last-seen time. */
  | {
      kind: 'sessions.orphaned';
      reason: string;
      before: string;
      /** The panel closing them: sessions owned by another panel whose lease is live are never orphans. */
      panelId?: string;
      /** Only sessions whose owning panel's lease expired (the periodic sweep, on any panel). */
      expiredOwnersOnly?: boolean;
    }
  /** reportsDrain: the session's agent announced workload.drain (absent in facts spilled by an older panel: false). */
  | { kind: 'deployment.dispatched'; deploymentId: string; sessionId: string; at: string; reportsDrain?: boolean }
  | { kind: 'deployment.delivered'; deploymentId: string; at: string }
  /** nodeId set: only a deployment of that node (an agent reports only its own). */
  | {
      kind: 'deployment.finished';
      deploymentId: string;
      status: DeploymentTerminal;
      reason: string;
      at: string;
      nodeId: string | null;
      /** `running` from an agent that pinned the image it ran (deploy.result imageRef); absent otherwise, and in facts spilled before. */
      imageRef?: string | null;
    }
  /** The agent's deploy.drained: recorded once (the first wins), only for a deployment of that node. */
  | { kind: 'deployment.drained'; deploymentId: string; nodeId: string; connectionsOpenAtSwitch: number | null; connectionsCut: number | null; drainEndedAt: string }
  /**
   * The agent's allocations.drained (capability allocations.drain): one rollout's drain of a managed deployment,
   * recorded once per allocation (the first report naming it wins); the deployment's drain follows once it is
   * drained (db/managed-drains.ts). Result: whether the report was recorded.
   */
  | ({ kind: 'allocation.drained' } & AllocationDrainReport)
  /**
   * A node's complete allocations.status (capability workload.allocations): each reported allocation's status,
   * written only where it changed, and `{ state: 'removed' }` on the node's desired=stop allocations it no longer
   * lists; fenced by the session's generation (absent: a lone panel, unfenced). Result: whether any row changed.
   */
  | { kind: 'allocations.status'; nodeId: string; sessionId: string; at: string; generation?: number; statuses: { allocationId: string; serviceId: string; status: Record<string, unknown> }[] }
  | { kind: 'reload'; nodeId: string; key: string | null; at: string; hashBefore: string | null; hashAfter: string; reason: string }
  /** An audit row that is not part of a change's transaction: a refusal, a fleet-page sign-in or sign-out. */
  | { kind: 'audit'; row: AuditRow };

export const ORPHANED_REASON = 'panel stopped without closing its sessions';
export const EXPIRED_OWNER_REASON = "the owning panel's lease expired (panel killed or cut off from the database)";

/** What a durable fact's write answered (deployment.finished and deployment.drained: whether the row changed; allocation.drained: whether it was recorded). */
export type FactResult = boolean | undefined;

/** Writes facts to the database. Implementations are idempotent per fact. */
export interface FactWriter {
  /** Applies the facts in order, atomically (one transaction): all or none. */
  apply(facts: readonly DurableFact[]): Promise<FactResult[]>;
  /** Moves last-seen times (node id → epoch ms) forward, never back: one statement. */
  lastSeen(times: ReadonlyMap<string, number>): Promise<void>;
  /** Records when tokens were last used (token id → epoch ms): one statement. */
  tokensUsed(times: ReadonlyMap<string, number>): Promise<void>;
}
