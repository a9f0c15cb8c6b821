import os from 'node:os';
import { pino, type Logger } from 'pino';
import { createAgent, type Agent } from './agent.js';
import { ConfigError, loadConfig, type AgentConfig } from './config.js';
import type { RoutingController, WorkloadController } from './controllers.js';
import { UnavailableWorkloads } from './null-controllers.js';
import { createRoutingController } from './proxy/index.js';
import { createDockerWorkloadController } from './runtime/index.js';

// Reads configuration, builds the controllers the config asks for and starts the agent.

function controllers(config: AgentConfig, nodeName: string, logger: Logger, agent: () => Agent | undefined): { workloads: WorkloadController; routing: RoutingController } {
  const workloads =
    config.runtime.kind === 'none'
      ? new UnavailableWorkloads()
      : createDockerWorkloadController(config.runtime, nodeName, {
          logger,
          // A container that crashed past its restart budget fails its deployment, visibly, on the panel.
          onFailure: (report) => agent()?.connection.reportResult(report.deploymentId, { status: 'failed', code: report.code, reason: report.reason }),
        });
  const routing = createRoutingController({ ...config, nodeName }, { logger });
  return { workloads, routing };
}

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
  const logger = pino({ level: config.logLevel });
  const nodeName = config.nodeName ?? os.hostname();
  const ref: { agent?: Agent } = {};
  const agent = createAgent({ ...config, nodeName }, { logger, ...controllers(config, nodeName, logger, () => ref.agent) });
  ref.agent = agent;
  logger.info({ panel: config.panelUrl, node: nodeName, runtime: config.runtime.kind, proxy: config.proxy.kind }, 'tether agent starting');
  await agent.start();

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'agent stopping');
    await agent.stop();
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
