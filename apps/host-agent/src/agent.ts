import type { Logger } from '@tether/common';
import type { AgentConfig } from './config.js';
import { PanelConnection } from './connection/panel-connection.js';
import type { PendingEvents, RoutingController, WorkloadController } from './controllers.js';
import type { LogStreams } from './logs/index.js';
import { DecommissionGuard } from './decommission-guard.js';

export const AGENT_VERSION = '0.1.0';

export interface Agent {
  connection: PanelConnection;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Composes the agent from its config and the two controllers it drives. */
export function createAgent(
  config: AgentConfig,
  deps: { logger: Logger; workloads: WorkloadController; routing: RoutingController; events?: PendingEvents; logs?: LogStreams },
): Agent {
  const connection = new PanelConnection({
    panelUrl: config.panelUrls,
    token: config.nodeToken,
    nodeName: config.nodeName,
    agentVersion: AGENT_VERSION,
    workloads: deps.workloads,
    routing: deps.routing,
    ...(deps.events ? { events: deps.events } : {}),
    ...(deps.logs ? { logs: deps.logs } : {}),
    reconnect: config.reconnect,
    protocolVersions: config.protocolVersions,
    overrides: config.overrides,
    fence: { afterMs: config.fence.afterMs, stopTimeoutMs: config.runtime.timing.stopTimeoutMs },
    logger: deps.logger,
  });
  // What the workloads report on their own goes through the session (held for the next one when none is open).
  deps.workloads.onReport?.((report) =>
    report.kind === 'drained'
      ? connection.reportDrained(report.drain)
      : connection.reportResult(report.deploymentId, { status: 'failed', code: report.code, reason: report.reason }),
  );
  const guard = new DecommissionGuard(config.stateDir, deps.workloads, deps.logger);
  return {
    connection,
    async start() {
      // A node decommissioned in an earlier run starts nothing (decommission-guard.ts).
      await guard.start(connection);
      await deps.workloads.start();
      await deps.routing.start();
      connection.start();
    },
    async stop() {
      await connection.stop();
      await deps.routing.stop();
      await deps.workloads.stop();
    },
  };
}
