import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { splitHostPort, type Logger } from '@tether/common';
import type { AgentConfig } from '../config.js';
import type { RoutingController } from '../controllers.js';
import { layered } from '../routing-layer.js';
import type { NewJournalEvent } from '../proxy/event-journal.js';
import type { ReloadRecord } from '../proxy/configurator.js';
import { startCanaryEndpoint, type CanaryEndpoint } from './canary-endpoint.js';
import { CanaryMonitor } from './canary-monitor.js';
import { CanaryStateStore } from './canary-state.js';

export { attributeDrop } from './attribution.js';
export { CANARY_SECRET_HEADER, startCanaryEndpoint, type CanaryEndpoint } from './canary-endpoint.js';
export { CanaryMonitor, type CanaryMonitorOptions } from './canary-monitor.js';
export { CanaryStateStore } from './canary-state.js';

export interface Canary {
  monitor: CanaryMonitor;
  endpoint: CanaryEndpoint;
  /** Tell the canary of every reload (the routing controller's onReload). */
  noteReload(reload: ReloadRecord): void;
}

/**
 * Starts the canary's endpoint and builds its monitor (started with the
 * routing controller, see withCanary). Null when TETHER_CANARY_INTERVAL_MS
 * is 0 or the agent runs no proxy.
 */
export async function createCanary(
  config: AgentConfig,
  deps: {
    logger: Logger;
    onDrop: (event: NewJournalEvent) => void;
    now?: () => Date;
    /** Container mode: the proxy container's address on Tether's network (null while none runs). */
    proxyAddress?: () => Promise<string | null>;
  },
): Promise<Canary | null> {
  if (config.canary.intervalMs === 0 || config.proxy.kind === 'none') return null;
  const now = deps.now ?? (() => new Date());
  const state = await CanaryStateStore.open(path.join(config.stateDir, 'canary-state.json'), { now, logger: deps.logger });
  // Per agent run, never written anywhere: only this process's monitor knows it.
  const secret = randomBytes(24).toString('base64url');
  let endpoint: CanaryEndpoint;
  try {
    endpoint = await startCanaryEndpoint({ ...splitHostPort(config.canary.listen), secret });
  } catch (error) {
    // The canary proves the proxy path; it must never keep the agent (and so deploys and routing) from running.
    deps.logger.error({ err: error, listen: config.canary.listen }, 'canary endpoint cannot listen; running without the canary');
    return null;
  }
  const { proxyUrl: configured, proxyPort } = config.canary;
  const resolveAddress = deps.proxyAddress;
  const proxyUrl =
    configured !== null
      ? async () => configured
      : resolveAddress
        ? async () => {
            const address = await resolveAddress();
            return address === null ? null : `http://${address.includes(':') ? `[${address}]` : address}:${proxyPort}`;
          }
        : async () => `http://127.0.0.1:${proxyPort}`;
  const monitor = new CanaryMonitor({ proxyUrl, secret, intervalMs: config.canary.intervalMs, state, onDrop: deps.onDrop, logger: deps.logger, now });
  return { monitor, endpoint, noteReload: (reload) => monitor.noteReload(reload) };
}

/** The routing controller with the canary: started after it, stopped before it, its status in routing.canary. */
export function withCanary(routing: RoutingController, canary: Canary | null): RoutingController {
  if (!canary) return routing;
  return layered(routing, {
    start: () => canary.monitor.start(),
    async stop() {
      await canary.monitor.stop();
      await canary.endpoint.close();
    },
    status: (status) => ({ ...status, canary: canary.monitor.status() }),
  });
}
