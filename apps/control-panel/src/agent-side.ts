import type { FastifyBaseLogger } from 'fastify';
import { CLOSE_CODES, closeCodeName } from '@tether/protocol';
import type { PanelConfig } from './config.js';
import type { PanelEvents } from './panel-events.js';
import type { PanelMetrics } from './panel-metrics.js';
import type { Db } from './db/database.js';
import { PrismaReloadRecorder } from './routing/reload-store.js';
import { PrismaRoutingMapSource, type RoutingMapSource } from './routing/routing-map.js';
import { RoutingReconciler } from './routing/routing-reconciler.js';
import { SessionRegistry } from './sessions/registry.js';
import { SessionDispatcher } from './sessions/session-dispatcher.js';
import type { SessionStore } from './sessions/session-store.js';
import { WorkloadSync } from './sessions/workload-sync.js';

// The agent side of the panel, wired in one place: the connected map, deploy
// dispatch, workload sync, routing push, decommission and session metrics.
// app.ts starts it when the app is ready and stops it before the app closes.

export interface AgentSide {
  registry: SessionRegistry;
  dispatcher: SessionDispatcher;
  workloads: WorkloadSync;
  routing: RoutingReconciler;
  start(): void;
  stop(): Promise<void>;
}

export function createAgentSide(deps: {
  config: PanelConfig;
  prisma: Db;
  store: SessionStore;
  maps?: RoutingMapSource;
  events: PanelEvents;
  metrics: PanelMetrics;
  logger: FastifyBaseLogger;
}): AgentSide {
  const { config, store, events, metrics, logger } = deps;
  const registry = new SessionRegistry({
    store,
    logger,
    pingIntervalMs: config.sessions.pingIntervalMs,
    lastSeenFlushMs: config.sessions.lastSeenFlushMs,
  });
  const dispatcher = new SessionDispatcher({ registry, store, events, logger, metrics });
  const workloads = new WorkloadSync(registry, store, events, logger);
  const routing = new RoutingReconciler({
    sessions: registry,
    maps: deps.maps ?? new PrismaRoutingMapSource(deps.prisma),
    events,
    reloads: new PrismaReloadRecorder(deps.prisma),
    logger,
    intervalMs: config.routing.reconcileIntervalMs,
    debounceMs: config.routing.debounceMs,
  });

  events.on('node.decommissioned', ({ nodeId }) => {
    registry.close(nodeId, CLOSE_CODES.DECOMMISSIONED, 'node decommissioned by an operator');
  });

  registry.on('opened', () => {
    metrics.sessionsOpened.inc();
    metrics.sessionsConnected.set(registry.size);
  });
  registry.on('closed', (_session, teardown) => {
    metrics.sessionsConnected.set(registry.size);
    metrics.sessionTeardowns.inc({ reason: closeCodeName(teardown.code) ?? String(teardown.code) });
  });
  registry.on('message', (_session, message) => metrics.framesReceived.inc({ type: message.type }));

  return {
    registry,
    dispatcher,
    workloads,
    routing,
    start() {
      registry.start();
      routing.start();
    },
    async stop() {
      await routing.stop();
      await registry.stop();
    },
  };
}
