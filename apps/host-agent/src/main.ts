import { runMain } from '@tether/common';
import { createLogger } from '@tether/common/logging';
import { composeAgent } from './compose.js';
import { loadConfig } from './config.js';
import { createDockerClient } from './docker/docker-client.js';

// Reads configuration, composes the agent (compose.ts: its parts and their start order) and runs it until a signal.

runMain(
  () => loadConfig(process.env),
  async (config) => {
    const logger = createLogger({ level: config.logLevel, format: config.logFormat });
    // The one Docker client of the process, handed to every part that talks to Docker.
    const agent = await composeAgent(config, logger, createDockerClient(config.runtime.dockerHost));
    logger.info({ panels: config.panelUrls, node: config.nodeName, runtime: config.runtime.kind, proxy: config.proxy.kind }, 'tether agent starting');
    await agent.start();
    return {
      async stop(signal) {
        logger.info({ signal }, 'agent stopping');
        await agent.stop();
      },
    };
  },
);
