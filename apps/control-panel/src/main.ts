import { pino } from 'pino';
import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { openDatabase } from './db/database.js';

// Reads configuration, opens the database and listens. Everything else is built in app.ts.

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
  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    embeddedPort: config.embeddedPgPort,
    log: { info: (m) => logger.info(m), warn: (m) => logger.warn(m) },
  });
  logger.info({ embedded: Boolean(db.embedded), applied: db.migrations.applied }, 'database ready');

  let app;
  let address;
  try {
    app = await buildApp({ config, prisma: db.prisma, logger });
    address = await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    await db.close();
    throw err;
  }
  const url = config.publicUrl ?? address.replace('0.0.0.0', '127.0.0.1');
  console.log(`Tether control panel listening on ${url}`);

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, 'shutting down');
    await app.close();
    await db.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
