import { EventEmitter } from 'node:events';

// In-process notifications from the REST side (which writes the database) to
// the session side (which talks to agents). Emitted after the transaction
// commits; never carries side effects inside a transaction.

export interface PanelEventMap {
  /** Routes or the services they point at changed for these nodes: push routing maps. */
  'routing.changed': [{ nodeIds: string[]; reason: string; /** Signalled by another panel (not sent on again). */ remote?: boolean }];
  /** The set of workloads a node should run changed (service created, updated, deleted): send `workloads`. */
  'workloads.changed': [{ nodeId: string; reason: string; remote?: boolean }];
  /** An operator decommissioned a node (or declared it lost; here, or on another panel: `remote`): close its session with 4005, refuse its token. */
  'node.decommissioned': [{ nodeId: string; remote?: boolean }];
  /** A token was revoked (here, or on another panel: `remote`): everything it holds ends, its caches forget it. */
  'token.revoked': [{ tokenId: string; remote?: boolean }];
  /** A fleet-page cookie was signed out (here, or on another panel): no panel accepts it again. */
  'cookie.signed-out': [{ cookieId: string; expiresAtMs: number; remote?: boolean }];
  // Scheduler (issue 36, cluster/scheduler-loop.ts).
  /** The scheduler changed these nodes' allocations (here, or on another panel: `remote`): send their sessions on this panel their `allocations` frame. */
  'allocations.changed': [{ nodeIds: string[]; reason: string; remote?: boolean }];
  /** Something the scheduler places from changed (a deployment of a managed service, a cordon): evaluate soon. */
  'scheduler.nudge': [{ reason: string; nodeId?: string }];
  /** An allocations.status of this node was stored (the session side emits it after ingestion): a rollout may go on. */
  'allocations.reported': [{ nodeId: string }];
}

export class PanelEvents extends EventEmitter<PanelEventMap> {}
