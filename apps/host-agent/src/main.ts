import { pino } from 'pino';
import { ConfigError, loadConfig } from './config.js';

// Reads configuration and starts the agent. The agent itself is composed in agent.ts.

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
  logger.info({ panel: config.panelUrl }, 'tether agent starting');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
