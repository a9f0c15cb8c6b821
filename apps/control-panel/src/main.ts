import { pino } from 'pino';
import { runMain } from '@tether/common';
import { loadConfig } from './config.js';
import { startPanel } from './server.js';

// Reads configuration, starts the panel (server.ts) and stops it on a signal.

runMain(
  () => loadConfig(process.env),
  async (config) => {
    const logger = pino({ level: config.logLevel });
    const panel = await startPanel(config, { logger, print: (text) => console.log(text) });
    return {
      async stop(signal) {
        logger.info({ signal }, 'shutting down');
        await panel.close();
      },
    };
  },
);
