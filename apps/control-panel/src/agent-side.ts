import { listen, type Logger, type Unsubscribe } from '@tether/common';
import { CLOSE_CODES, closeCodeName } from '@tether/protocol';
import type { PanelConfig } from './config.js';
import type { Db } from './db/database.js';
import type { PanelEvents } from './panel-events.js';
import { RELOAD_METRIC_KIND, RELOAD_METRIC_KINDS, type PanelMetrics } from './panel-metrics.js';
import { PrismaReloadRecorder } from './routing/reload-store.js';
import type { ProxyEventStore, ReloadRecorder } from './routing/routing-reconciler.js';
import { DbRoutingMapSource, type RoutingMapSource } from './routing/routing-map.js';
import { RoutingAudience } from './routing/routing-audience.js';
import { RoutingReconciler } from './routing/routing-reconciler.js';
import { FrameRouter } from './sessions/frame-router.js';
import type { SessionGenerations } from './sessions/generations.js';
import { SessionRegistry } from './sessions/registry.js';
import { SessionDispatcher } from './dispatch/session-dispatcher.js';
import type { SessionFactOutbox } from './session-writes/outbox.js';
import type { SessionStore } from './session-writes/session-store.js';
import { WorkloadSync } from './dispatch/workload-sync.js';
import { AllocationSync } from './dispatch/allocation-sync.js';
import type { Keyring } from './secrets/keyring.js';
import { SecretDelivery } from './secrets/secret-delivery.js';
import { LogRelay } from './log-streams/log-relay.js';
import { VolumeReports } from './sessions/volume-reports.js';
import { CertificateRelay } from './routing/certificate-relay.js';

// The agent side of the panel, wired in one place: the connected map, deploy
// dispatch, workload sync, routing push, decommission and session metrics.
// Constructors subscribe to nothing; every listener is added here, and removed
// when the agent side stops (a restarted app on the same PanelEvents must not
// leave the old one listening). It is the lifecycle's agent-side component
// (app.ts's LIFECYCLE_ORDER): started when the app is ready, stopped before it closes.

export interface AgentSide {
  registry: SessionRegistry;
  /** Where every valid frame of a session goes: one handler per type, observers after it. */
  frames: FrameRouter;
  dispatcher: SessionDispatcher;
  workloads: WorkloadSync;
  /** Capability workload.allocations: `allocations` sets out, `allocations.status` in (the scheduler calls changed() and listens with onStatusStored). */
  allocations: AllocationSync;
  routing: RoutingReconciler;
  /** Log streams relayed from sessions to HTTP clients. */
  logs: LogRelay;
  /** Nodes' volume reports, stored for GET /v1/volumes. */
  volumeReports: VolumeReports;
  /** certificates.share: issuers' reports stored, other serving nodes sent their domains' certificates. */
  certificates: CertificateRelay;
  start(): void;
  stop(): Promise<void>;
}

/**
 * Connects a routing reconciler to the sessions it pushes to, the frames that answer its pushes and
 * REST's routing changes. (Heartbeats reach it through the heartbeat handler, which has other readers.)
 */
export function wireRouting(registry: SessionRegistry, frames: FrameRouter, events: PanelEvents, routing: RoutingReconciler): Unsubscribe {
  const off = [
    listen(registry, 'opened', (session) => routing.sessionOpened(session)),
    listen(registry, 'closed', (session) => routing.sessionClosed(session)),
    frames.handle('routing.applied', (session, message) => routing.applied(session, message)),
    frames.handle('proxy.events', (session, message) => routing.proxyEvents(session, message)),
    listen(events, 'routing.changed', ({ nodeIds, reason }) => routing.changed(nodeIds, reason)),
  ];
  return () => off.forEach((f) => f());
}

/** Counts every reload and canary drop an agent reports (each once: only what the store newly recorded), then records it. */
function countedReloads(inner: PrismaReloadRecorder, registry: SessionRegistry, metrics: PanelMetrics): ReloadRecorder & ProxyEventStore {
  return {
    reloaded(record) {
      const node = registry.get(record.nodeId)?.nodeName;
      // Agents without proxy.events: by whether the routing hash changed.
      const kind = RELOAD_METRIC_KIND[record.hashBefore === record.hashAfter ? 'repair-drift' : 'change'];
      if (node) metrics.nodeProxyReloads.inc({ node, kind });
      return inner.reloaded(record);
    },
    async store(nodeId, events) {
      const stored = await inner.store(nodeId, events);
      const node = registry.get(nodeId)?.nodeName;
      if (!node) return stored;
      for (const e of stored) {
        if (e.event === 'reload') metrics.nodeProxyReloads.inc({ node, kind: RELOAD_METRIC_KIND[e.kind] });
        else metrics.nodeCanaryDrops.inc({ node, cause: e.cause });
      }
      return stored;
    },
  };
}

export function createAgentSide(deps: {
  config: PanelConfig;
  prisma: Db;
  store: SessionStore;
  /** The one ordered writer of session facts (reloads go through it too). */
  outbox: SessionFactOutbox;
  maps?: RoutingMapSource;
  events: PanelEvents;
  metrics: PanelMetrics;
  logger: Logger;
  /** Several panels: the generation each session's claim took (the cluster sets them, the registry reads them). */
  generations?: SessionGenerations;
  /** Opens secrets for deploy frames; null: no key configured. */
  keyring: Keyring | null;
}): AgentSide {
  const { config, store, events, metrics, logger } = deps;
  const registry = new SessionRegistry({
    store,
    logger,
    pingIntervalMs: config.sessions.pingIntervalMs,
    lastSeenFlushMs: config.sessions.lastSeenFlushMs,
    restartOpensPerSec: config.sessions.restartOpensPerSec,
    ...(deps.generations ? { generations: deps.generations } : {}),
  });
  const secrets = new SecretDelivery(deps.prisma, deps.keyring);
  const workloads = new WorkloadSync(registry, store, logger, secrets);
  const allocations = new AllocationSync({
    registry,
    prisma: deps.prisma,
    outbox: deps.outbox,
    logger,
    secrets,
    ...(deps.generations ? { generationOf: (sessionId: string) => deps.generations!.get(sessionId) } : {}),
    // No session here: `workloads.changed` reaches the panel holding it (the cluster forwards it).
    elsewhere: (nodeId, reason) => events.emit('workloads.changed', { nodeId, reason }),
  });
  const dispatcher = new SessionDispatcher({ registry, store, events, logger, metrics, sentDeploys: workloads, secrets });
  const recorder = countedReloads(new PrismaReloadRecorder(deps.prisma, deps.outbox), registry, metrics);
  const certificates = new CertificateRelay({ prisma: deps.prisma, keyring: deps.keyring, events, logger });
  const routing = new RoutingReconciler({
    sessions: registry,
    certificates,
    maps: deps.maps ?? new DbRoutingMapSource(deps.prisma),
    reloads: recorder,
    events: recorder,
    onPush: (node, outcome) => metrics.nodeRoutingPushes.inc({ node, outcome }),
    logger,
    intervalMs: config.routing.reconcileIntervalMs,
    debounceMs: config.routing.debounceMs,
  });

  // Cross-node routing (issue 37): a replica that starts, stops or loses its session changes the maps of every node serving its service.
  const audience = new RoutingAudience({
    prisma: deps.prisma,
    changed: (nodeIds, reason) => events.emit('routing.changed', { nodeIds, reason }),
    logger,
  });

  const logs = new LogRelay(config.logs, logger);
  const volumeReports = new VolumeReports(deps.prisma, registry, logger);
  const frames = new FrameRouter();

  /** Nodes whose per-node series were started at 0 by this process. */
  const seriesStarted = new Set<string>();
  /** The frame counter of each message type, looked up once (every heartbeat counts). */
  const frameCounters = new Map<string, { inc(): void }>();
  const framesOf = (type: string) => {
    let counter = frameCounters.get(type);
    if (!counter) frameCounters.set(type, (counter = metrics.framesReceived.labels({ type })));
    return counter;
  };

  // In this order: a deployment's awaited results are loaded before the node is sent its workloads and map.
  const off: Unsubscribe[] = [
    listen(registry, 'opened', (session) => {
      void dispatcher.sessionOpened(session);
      workloads.sessionOpened(session);
    }),
    // A heartbeat is read three times, in this order: the session's report, the routing view, a deployment it may settle.
    frames.handle('heartbeat', (session, message) => {
      session.recordHeartbeat(message.seq, message.containers, message.runtime, message.routing);
      routing.heartbeat(session, message);
      void dispatcher.heartbeatSeen(session, message);
    }),
    frames.handle('deploy.result', (session, message) => void dispatcher.resultReceived(session, message)),
    frames.handle('deploy.drained', (session, message) => void dispatcher.drainedReceived(session, message)),
    frames.handle('allocations.drained', (session, message) => void dispatcher.allocationsDrainedReceived(session, message)),
    wireRouting(registry, frames, events, routing),
    frames.handle('volumes.report', (session, message) => volumeReports.received(session, message)),
    frames.handle('certificates.report', (session, message) => certificates.received(session, message)),
    listen(registry, 'closed', (session) => volumeReports.sessionClosed(session)),
    frames.handle('logs.chunk', (session, message) => logs.chunkReceived(session, message)),
    frames.handle('logs.end', (session, message) => logs.endReceived(session, message)),
    listen(registry, 'closed', (session, teardown) => logs.sessionClosed(session, teardown.reason)),
    listen(events, 'workloads.changed', ({ nodeId, reason }) => workloads.changed(nodeId, reason)),
    // Allocations (issue 36): a capable session gets `allocations` sets (WorkloadSync skips it); its statuses are recorded.
    listen(registry, 'opened', (session) => allocations.sessionOpened(session)),
    listen(registry, 'closed', (session) => allocations.sessionClosed(session)),
    listen(events, 'workloads.changed', ({ nodeId, reason }) => allocations.changedHere(nodeId, reason)),
    frames.handle('allocations.status', (session, message) => void allocations.statusReceived(session, message)),
    allocations.onStatusStored((nodeId) => audience.nodeChanged(nodeId, 'a replica reported')),
    // A close, once written (the maps are read from the database, so before it they would say the same): its replicas
    // leave the other nodes' maps. An open needs nothing here: the agent's allocations.status follows its welcome
    // through the same ordered writer, and that report brings its endpoints back. (Looking up every open cost a
    // reconnect storm of 10,000 agents 0.7 s, bench/fleet.ts.)
    listen(registry, 'recorded', ({ nodeId, kind }) => {
      if (kind === 'closed') audience.nodeChanged(nodeId, "a node's session closed");
    }),
    listen(events, 'allocations.changed', ({ nodeIds }) => nodeIds.forEach((nodeId: string) => audience.nodeChanged(nodeId, 'replicas placed or stopped'))),
    listen(events, 'node.decommissioned', ({ nodeId }) => {
      registry.close(nodeId, CLOSE_CODES.DECOMMISSIONED, 'node decommissioned (or declared lost) by an operator');
    }),
    // Metrics.
    listen(registry, 'opened', (session) => {
      metrics.sessionsOpened.inc();
      metrics.sessionsConnected.set(registry.size);
      const node = session.nodeName;
      metrics.nodeSessionsOpened.inc({ node });
      // Per-node counters exist from the first session on, so increase() sees their first event. Once per node
      // and process: a label lookup each is a share of a storm's opens worth saving.
      if (seriesStarted.has(node)) return;
      seriesStarted.add(node);
      metrics.nodeAckTimeouts.inc({ node }, 0);
      metrics.nodeDrainConnectionsCut.inc({ node }, 0);
      for (const kind of RELOAD_METRIC_KINDS) metrics.nodeProxyReloads.inc({ node, kind }, 0);
    }),
    listen(registry, 'closed', (session, teardown) => {
      metrics.sessionsConnected.set(registry.size);
      metrics.sessionTeardowns.inc({ reason: closeCodeName(teardown.code) ?? String(teardown.code) });
      if (teardown.code === CLOSE_CODES.ACK_TIMEOUT) metrics.nodeAckTimeouts.inc({ node: session.nodeName });
    }),
    frames.observe((_session, message) => framesOf(message.type).inc()),
  ];

  return {
    registry,
    frames,
    dispatcher,
    workloads,
    allocations,
    routing,
    logs,
    volumeReports,
    certificates,
    start() {
      registry.start();
      routing.start();
    },
    async stop() {
      // REST changes stop reaching this side first; the registry's own events still run while sessions close.
      await audience.stop();
      await routing.stop();
      await registry.stop();
      await workloads.stop();
      await allocations.stop();
      await volumeReports.idle();
      await certificates.idle();
      off.forEach((f) => f());
    },
  };
}
