import type { Db } from '../db/database.js';
import type { DeploymentDispatcher } from '../sessions/session-dispatcher.js';
import type { PanelEvents } from '../panel-events.js';
import type { VolumeRemover } from '../sessions/volume-remover.js';

/** What the /v1 resource plugins and the domain functions behind them work with (from buildApp's dependencies). */
export interface ApiDeps {
  prisma: Db;
  events: PanelEvents;
  dispatcher: DeploymentDispatcher;
  /** Removes a deleted service's volumes on its node; absent: `deleteVolumes` answers NODE_UNREACHABLE. */
  volumes?: VolumeRemover;
}
