import type { Db } from '../db/database.js';
import type { DeploymentDispatcher } from '../dispatch/session-dispatcher.js';
import type { PanelEvents } from '../panel-events.js';
import type { Keyring } from '../secrets/keyring.js';
import type { VolumeRemover } from '../dispatch/volume-remover.js';
import type { LiveRouting, RouteNode } from '../status/route-health.js';

/** What the /v1 resource plugins and the domain functions behind them work with (from buildApp's dependencies). */
export interface ApiDeps {
  prisma: Db;
  events: PanelEvents;
  dispatcher: DeploymentDispatcher;
  /** Seals service secrets; null: no key configured (secrets cannot be set). */
  keyring: Keyring | null;
  /** Removes a deleted service's volumes on its node; absent: `deleteVolumes` answers NODE_UNREACHABLE. */
  volumes?: VolumeRemover;
  /** The routing status live sessions carry for these nodes (route health); absent: every route reads unknown. */
  liveRouting?: (nodes: readonly RouteNode[]) => Promise<(node: RouteNode) => LiveRouting>;
  /**
   * The scheduler places a service made while no node is eligible once one is (TETHER_ALLOCATIONS=on): such a
   * service is made without a home, its replicas pending. False or absent: it is refused (409) as before.
   */
  placesLater?: boolean;
}
