import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import { pino, type Logger } from 'pino';
import { createAgent, type Agent } from './agent.js';
import { runMain } from '@tether/common';
import { loadConfig, type AgentConfig } from './config.js';
import { startHealthFile } from './health-file.js';
import type { RoutingController, WorkloadController } from './controllers.js';
import { UnavailableWorkloads } from './null-controllers.js';
import { createRoutingController } from './proxy/index.js';
import { createDockerWorkloadController } from './runtime/index.js';
import { createDockerClient } from './docker/docker-client.js';
import { DockerLogSource, LogStreams } from './logs/index.js';

// Reads configuration, builds the controllers the config asks for and starts the agent.

function controllers(
  config: AgentConfig,
  nodeName: string,
  logger: Logger,
  agent: () => Agent | undefined,
): { workloads: WorkloadController; routing: RoutingController; logs?: LogStreams } {
  const workloads =
    config.runtime.kind === 'none'
      ? new UnavailableWorkloads()
      : createDockerWorkloadController(config.runtime, nodeName, {
          logger,
          // A container that crashed past its restart budget fails its deployment, visibly, on the panel.
          onFailure: (report) => agent()?.connection.reportResult(report.deploymentId, { status: 'failed', code: report.code, reason: report.reason }),
        });
  const routing = createRoutingController({ ...config, nodeName }, { logger });
  // Logs are read straight from Docker (not through the runtime seam): a long-lived stream per follower.
  const logs =
    config.runtime.kind === 'none'
      ? undefined
      : new LogStreams({ source: new DockerLogSource(createDockerClient(config.runtime.dockerHost), nodeName), logger, maxStreams: config.logs.maxStreams });
  return { workloads, routing, ...(logs ? { logs } : {}) };
}

runMain(
  () => loadConfig(process.env),
  async (config) => {
    const logger = pino({ level: config.logLevel });
    const nodeName = config.nodeName ?? os.hostname();
    const ref: { agent?: Agent } = {};
    const agent = createAgent({ ...config, nodeName }, { logger, ...controllers(config, nodeName, logger, () => ref.agent) });
    ref.agent = agent;
    logger.info({ panel: config.panelUrl, node: nodeName, runtime: config.runtime.kind, proxy: config.proxy.kind }, 'tether agent starting');
    await mkdir(config.stateDir, { recursive: true });
    const session: { id: string | null } = { id: null };
    agent.connection.on('ready', ({ sessionId }) => (session.id = sessionId));
    agent.connection.on('closed', () => (session.id = null));
    const stopHealth = startHealthFile(config.stateDir, () => ({ connection: agent.connection.state, sessionId: session.id }));
    await agent.start();
    return {
      async stop(signal) {
        logger.info({ signal }, 'agent stopping');
        stopHealth();
        await agent.stop();
      },
    };
  },
);
