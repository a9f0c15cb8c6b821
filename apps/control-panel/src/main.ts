import { pino } from 'pino';
import { ConfigError, loadConfig } from './config.js';
import { startPanel } from './server.js';

// Reads configuration, starts the panel (server.ts) and stops it on a signal.

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
  const panel = await startPanel(config, { logger, print: (text) => console.log(text) });

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, 'shutting down');
    await panel.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
