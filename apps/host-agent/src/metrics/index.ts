import type { Logger } from '@tether/common';
import type { Agent } from '../agent.js';
import type { RoutingController } from '../controllers.js';
import { createAgentMetrics } from './agent-metrics.js';
import { startMetricsServer } from './metrics-server.js';

/** Starts the agent's metrics endpoint (main.ts, when TETHER_AGENT_METRICS_PORT is set). */
export async function startAgentMetrics(
  at: { host: string; port: number },
  agent: Agent,
  routing: RoutingController,
  health: () => { connection: string; sessionId: string | null },
  logger: Logger,
  drains?: () => { ended: number; connectionsCut: number },
): Promise<{ close(): Promise<void> }> {
  const registry = createAgentMetrics({
    connection: agent.connection,
    routing: () => routing.status(),
    ...(routing.answerer ? { answerer: routing.answerer.bind(routing) } : {}),
    ...(drains ? { drains } : {}),
  });
  const server = await startMetricsServer({ ...at, registry, health });
  logger.info({ host: at.host, port: server.port }, 'metrics endpoint listening (GET /metrics, GET /healthz)');
  return server;
}
