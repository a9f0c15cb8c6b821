import { EventEmitter } from 'node:events';

// In-process notifications from the REST side (which writes the database) to
// the session side (which talks to agents). Emitted after the transaction
// commits; never carries side effects inside a transaction.

export interface PanelEventMap {
  /** Routes or the services they point at changed for these nodes: push routing maps. */
  'routing.changed': [{ nodeIds: string[]; reason: string; /** Signalled by another panel (not sent on again). */ remote?: boolean }];
  /** The set of workloads a node should run changed (service created, updated, deleted): send `workloads`. */
  'workloads.changed': [{ nodeId: string; reason: string; remote?: boolean }];
  /** An operator decommissioned a node: close its session, refuse its token. */
  'node.decommissioned': [{ nodeId: string }];
  /** A token was revoked (here, or on another panel: `remote`): everything it holds ends, its caches forget it. */
  'token.revoked': [{ tokenId: string; remote?: boolean }];
  /** A fleet-page cookie was signed out (here, or on another panel): no panel accepts it again. */
  'cookie.signed-out': [{ cookieId: string; expiresAtMs: number; remote?: boolean }];
}

export class PanelEvents extends EventEmitter<PanelEventMap> {}
