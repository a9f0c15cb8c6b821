import type { Db } from '../db/database.js';
import type { DeploymentDispatcher } from '../sessions/session-dispatcher.js';
import type { PanelEvents } from '../panel-events.js';
import type { Keyring } from '../secrets/keyring.js';
import type { VolumeRemover } from '../sessions/volume-remover.js';

/** What the /v1 resource plugins and the domain functions behind them work with (from buildApp's dependencies). */
export interface ApiDeps {
  prisma: Db;
  events: PanelEvents;
  dispatcher: DeploymentDispatcher;
  /** Seals service secrets; null: no key configured (secrets cannot be set). */
  keyring: Keyring | null;
  /** Removes a deleted service's volumes on its node; absent: `deleteVolumes` answers NODE_UNREACHABLE. */
  volumes?: VolumeRemover;
}
