import type { FastifyBaseLogger } from 'fastify';
import { createLoop, type Loop } from '@tether/common';

/**
 * A periodic database read whose last good result stays in use while the
 * database fails: the failure is logged once per outage (not once per
 * refresh), and its end once.
 */
export function cachedRead(options: { name: string; what: string; refreshMs: number; logger: FastifyBaseLogger; read: () => Promise<void> }): Loop {
  let failing = false;
  return createLoop({
    name: options.name,
    intervalMs: options.refreshMs,
    runImmediately: true,
    run: async () => {
      await options.read();
      if (failing) options.logger.info(`${options.what}: the database answers again`);
      failing = false;
    },
    onError: (err) => {
      if (!failing) options.logger.warn({ err }, `${options.what}: refresh failed, keeping the last read`);
      failing = true;
    },
  });
}
