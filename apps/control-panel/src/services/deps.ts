import type { Db } from '../db/database.js';
import type { DeploymentDispatcher } from '../deployments/dispatcher.js';
import type { PanelEvents } from '../lib/events.js';
import type { Prisma } from '../generated/prisma/client.js';

/** What the /v1 resource plugins and their services work with (from buildApp's dependencies). */
export interface ApiDeps {
  prisma: Db;
  events: PanelEvents;
  dispatcher: DeploymentDispatcher;
}

export type Tx = Prisma.TransactionClient;
