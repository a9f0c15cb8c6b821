import path from 'node:path';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { PanelConfig } from './config.js';
import type { Db } from './db/database.js';
import type { RoutingMapSource } from './routing/routing-map.js';
import { createLoop, type Loop } from '@tether/common';
import { createAgentSide, type AgentSide } from './agent-side.js';
import { AUDIT_RETENTION_INTERVAL_MS, pruneAudit } from './domain/audit-query.js';
import { createFleet, type Fleet } from './dashboard/fleet.js';
import { DeploymentChanges } from './domain/deployment-changes.js';
import { HeldStreams } from './http/held-streams.js';
import { dialableUrl } from './http/internal-listener.js';
import { PanelCluster } from './cluster/cluster.js';
import { PanelEvents } from './panel-events.js';
import type { PanelMetrics } from './panel-metrics.js';
import type { Keyring } from './secrets/keyring.js';
import { PrismaFactWriter } from './session-writes/fact-writer.js';
import { SessionFactOutbox } from './session-writes/outbox.js';
import { SpillFile } from './session-writes/spill-file.js';
import { SessionGenerations } from './sessions/generations.js';
import type { DeploymentDispatcher } from './dispatch/session-dispatcher.js';
import { OutboxSessionStore, type SessionStore } from './session-writes/session-store.js';
import { Scheduler } from './cluster/scheduler-loop.js';
import { SchedulerLease } from './cluster/scheduler-lease.js';

// The panel's parts, each made once from what it needs (no part is handed a
// dependency after it is made): the session-fact outbox, the agent side, the
// cluster of panels sharing the database (with its dispatcher), deployment
// change watching, the fleet page's state, held streams and audit retention.
// app.ts declares their start and stop order (lifecycle.ts).

declare module 'fastify' {
  interface FastifyInstance {
    /** The agent side (connected map, dispatch, workload sync, routing push): its sessions, for tests and benches. */
    agentSide: AgentSide;
    /** This panel among the panels sharing the database (undefined without a database URL); server.ts tells its lease where it listens. */
    cluster: PanelCluster | undefined;
    /** The scheduler of managed services (issue 36): its lease and evaluations, for tests. */
    scheduler: Scheduler;
  }
}

/** Decorates the app with the parts read from outside it (see the declarations above). */
export function exposeParts(app: FastifyInstance, parts: PanelParts): void {
  app.decorate('agentSide', parts.agents);
  app.decorate('cluster', parts.cluster);
  app.decorate('scheduler', parts.scheduler);
}

/** What buildApp (app.ts) is made from. */
export interface AppDependencies {
  config: PanelConfig;
  prisma: Db;
  /** A pino logger; silent when absent (tests). */
  logger?: FastifyBaseLogger;
  /** REST → session notifications; a fresh one when absent. */
  events?: PanelEvents;
  /** The secrets keys (null: none); read from the configuration when absent (server.ts checks them against the rows first). */
  keyring?: Keyring | null;
  /** Sends persisted deployments to their node; the agent side's dispatcher when absent. */
  dispatcher?: DeploymentDispatcher;
  metrics?: PanelMetrics;
  /** Wraps what the agent side writes through (tests count the writes). */
  wrapSessionStore?: (store: SessionStore) => SessionStore;
  /** Where routing maps come from; the database when absent (bench/routing-panel.ts gives every node one map). */
  routingMaps?: RoutingMapSource;
  /** The database's URL for the lease and LISTEN connections (config.databaseUrl when absent; none: no claims, one panel). */
  databaseUrl?: string;
}

export interface PanelParts {
  events: PanelEvents;
  outbox: SessionFactOutbox;
  store: SessionStore;
  agents: AgentSide;
  /** This panel among the panels sharing the database; undefined without a database URL (one panel). */
  cluster: PanelCluster | undefined;
  /** Sends persisted deployments: across panels with a cluster, else on this panel's sessions. */
  dispatcher: DeploymentDispatcher;
  changes: DeploymentChanges;
  fleet: Fleet;
  held: HeldStreams;
  auditRetention: Loop;
  /** Places managed services' replicas while this panel holds the scheduler lease (issue 36). */
  scheduler: Scheduler;
}

export function createPanelParts(app: FastifyInstance, deps: AppDependencies, metrics: PanelMetrics, keyring: Keyring | null): PanelParts {
  const { config, prisma } = deps;
  const { db } = config;
  const logger = app.log;
  // Session facts (opens, closes, deployment transitions, reloads, last-seen and last-used times): one ordered writer.
  const outbox = new SessionFactOutbox({
    writer: new PrismaFactWriter(prisma, { maxWait: db.connectTimeoutMs, timeout: db.queryTimeoutMs * 2 }),
    spill: new SpillFile(path.join(config.dataDir, 'outbox', 'session-facts.jsonl')),
    logger,
    retryMaxMs: config.outbox.retryMaxMs,
    maxPending: config.outbox.maxPending,
  });
  const events = deps.events ?? new PanelEvents();
  const store = new OutboxSessionStore(prisma, outbox, db.connectTimeoutMs + db.queryTimeoutMs);
  // Several panels on one database: lease, claims before welcome, signals, shared reports, dispatch across panels.
  const databaseUrl = deps.databaseUrl ?? config.databaseUrl;
  // Made before both sides: the cluster records each claim's generation, the registry fences session facts with it.
  const generations = new SessionGenerations();
  const agents = createAgentSide({
    config,
    prisma,
    store: deps.wrapSessionStore ? deps.wrapSessionStore(store) : store,
    outbox,
    events,
    metrics,
    logger,
    keyring,
    ...(deps.routingMaps ? { maps: deps.routingMaps } : {}),
    ...(databaseUrl ? { generations } : {}),
  });
  const local = deps.dispatcher ?? agents.dispatcher;
  // Made before the cluster: a panel reaching a promoted database raises the fencing floor above the epoch it holds.
  const schedulerLease = new SchedulerLease({ prisma, panelId: config.panel.id, leaseMs: config.scheduler.leaseMs, logger });
  const cluster = databaseUrl
    ? new PanelCluster({
        prisma,
        databaseUrl,
        panelId: config.panel.id,
        internalUrl: config.panel.internalUrl,
        leaseMs: config.panel.leaseMs,
        peerTimeoutMs: config.panel.peerTimeoutMs,
        connectTimeoutMs: db.connectTimeoutMs,
        queryTimeoutMs: db.queryTimeoutMs,
        registry: agents.registry,
        frames: agents.frames,
        events,
        outbox,
        logger,
        generations,
        dispatch: { local, store, ackTimeoutMs: config.sessions.ackTimeoutMs },
        schedulerEpoch: () => schedulerLease.held?.epoch ?? 0,
      })
    : undefined;
  // Deployment watchers wake when their row is written (NOTIFY from a trigger), not on a timer.
  const signals = cluster?.signals;
  const changes = new DeploymentChanges(prisma, {
    sweepMs: config.deployments.sweepMs,
    pollMs: config.deployments.watchPollMs,
    logger,
    ...(signals ? { listening: () => signals.listening } : {}),
  });
  signals?.on('deployment', (id) => changes.changed([id]));
  signals?.on('connected', () => changes.rescan());
  // The fleet page and the per-node metrics: rows from the connected map plus cached database facts.
  const fleet = createFleet({
    config,
    prisma,
    registry: agents.registry,
    routing: agents.routing,
    metrics,
    logger,
    ...(cluster
      ? {
          heldElsewhere: (nodeId: string) => cluster.heldElsewhere(nodeId),
          cluster: {
            panelId: cluster.panelId,
            get leaseHeld() {
              return cluster.lease.mayServe;
            },
            elsewhere: (nodeId: string) => cluster.connectedElsewhere(nodeId),
          },
        }
      : {}),
  });
  const held = new HeldStreams(config.streams);
  const parts = { events, outbox, store, agents, cluster, dispatcher: cluster?.dispatcher ?? local, changes, fleet, held };
  wireRevocations(app, deps, parts);
  if (cluster) announceListenAddress(app, cluster);
  const auditRetention = createLoop({
    name: 'audit-retention',
    intervalMs: AUDIT_RETENTION_INTERVAL_MS,
    run: async () => void (await pruneAudit(prisma, config.audit.retentionDays)),
    onError: (err) => logger.warn({ err }, 'could not delete old audit rows'),
  });
  const scheduler = createScheduler(app, deps, parts, schedulerLease);
  return { ...parts, auditRetention, scheduler };
}

/**
 * The scheduler (issue 36) and what nudges it. What it changes reaches the sessions through the
 * `allocations.changed` event (the session side's AllocationSync listens), here and, signalled, on the panel
 * holding each node's session; the session side tells it of stored statuses with `allocations.reported`.
 */
function createScheduler(app: FastifyInstance, deps: AppDependencies, parts: Pick<PanelParts, 'events' | 'agents' | 'cluster'>, lease: SchedulerLease): Scheduler {
  const { config } = deps;
  const { events, agents, cluster } = parts;
  const scheduler = new Scheduler({
    prisma: deps.prisma,
    panelId: config.panel.id,
    logger: app.log,
    leaseMs: config.scheduler.leaseMs,
    intervalMs: config.scheduler.intervalMs,
    progressDeadlineMs: config.scheduler.progressDeadlineMs,
    failover: config.scheduler.failover,
    holdsSession: (nodeId) => agents.registry.get(nodeId) !== undefined,
    ...(cluster ? { signals: cluster.signals } : {}),
    allocationsChanged: (nodeIds, reason, remote) => void events.emit('allocations.changed', { nodeIds: [...nodeIds], reason, ...(remote ? { remote } : {}) }),
    // As a delivered deploy does on the single-node path: a first release puts the service's routes on its node's map.
    deploymentsRunning: (ids) => void pushRoutingOf(deps, events, ids),
    lease,
  });
  events.on('workloads.changed', ({ nodeId, reason, remote }) => remote || scheduler.nudge(reason, nodeId));
  events.on('scheduler.nudge', ({ reason, nodeId }) => scheduler.nudge(reason, nodeId));
  events.on('allocations.reported', ({ nodeId }) => scheduler.onAllocationStatus(nodeId));
  // The two halves meet here: what the scheduler wrote goes out as allocations sets, what agents report moves rollouts on.
  events.on('allocations.changed', ({ nodeIds, reason }) => nodeIds.forEach((nodeId) => agents.allocations.changed(nodeId, reason)));
  agents.allocations.onStatusStored((nodeId) => scheduler.onAllocationStatus(nodeId));
  // A decommission on another panel nudged the holder there already.
  events.on('node.decommissioned', ({ nodeId, remote }) => {
    if (!remote) scheduler.nudge(`node ${nodeId} decommissioned`, nodeId);
  });
  // Sessions opening and closing do not nudge: in a reconnect storm that is an evaluation every MIN_GAP_MS on the
  // panel that is busiest opening sessions, and nothing about a session is urgent to the scheduler (failover waits a
  // grace, a node joining gets replicas at the next interval; its session gets its own set when it opens).
  return scheduler;
}

/** The routing push of managed deployments that reached running (routes stay on the service's home node, the deployment's node). */
async function pushRoutingOf(deps: AppDependencies, events: PanelParts['events'], deploymentIds: readonly string[]): Promise<void> {
  try {
    const rows = await deps.prisma.deployment.findMany({ where: { id: { in: [...deploymentIds] } }, select: { nodeId: true, spec: true } });
    const nodeIds = [...new Set(rows.flatMap((r) => (r.nodeId === null ? [] : [r.nodeId])))].sort();
    const names = rows.map((r) => (r.spec as { name?: string } | null)?.name ?? 'a service').join(', ');
    if (nodeIds.length > 0) events.emit('routing.changed', { nodeIds, reason: `${names} deployed (rolled out by the scheduler)` });
  } catch {
    // The periodic push (TETHER_RECONCILE_INTERVAL_MS) carries the map anyway.
  }
}

/** A revoked token, here or (signalled) on another panel: its streams and waits end, no cache honours it. */
function wireRevocations(app: FastifyInstance, deps: AppDependencies, parts: Pick<PanelParts, 'events' | 'cluster' | 'fleet' | 'held'>): void {
  const { events, fleet, held } = parts;
  events.on('token.revoked', ({ tokenId }) => {
    held.revoke(tokenId);
    app.authenticator.forget(tokenId);
    fleet.tokens.forget(tokenId);
    fleet.feed.recheck();
  });
  events.on('cookie.signed-out', ({ cookieId, expiresAtMs }) => {
    fleet.signedOut.note(cookieId, expiresAtMs);
    fleet.feed.recheck();
  });
  async function recheckHeld(): Promise<void> {
    const ids = held.tokenIds();
    if (ids.length > 0) {
      const revoked = await deps.prisma.apiToken.findMany({ where: { id: { in: ids }, revokedAt: { not: null } }, select: { id: true } });
      for (const { id } of revoked) events.emit('token.revoked', { tokenId: id, remote: true });
    }
    await Promise.all([fleet.tokens.refresh(), fleet.signedOut.refresh()]);
    fleet.feed.recheck();
  }
  // Revocations signalled while LISTEN was down: the tokens holding streams here are read again.
  parts.cluster?.signals.on('connected', () => void recheckHeld().catch((err: unknown) => app.log.warn({ err }, 'revocation rescan failed')));
}

/**
 * No internal URL configured: the address this panel listens on (unless a wildcard, which no other panel can
 * dial); with a separate internal listener, that listener's address (server.ts, once it listens).
 */
function announceListenAddress(app: FastifyInstance, cluster: PanelCluster): void {
  app.addHook('onListen', async () => {
    const address = app.server.address();
    if (cluster.lease.internalUrl || app.internalListener || !address || typeof address === 'string') return;
    const url = dialableUrl(address);
    if (url) cluster.lease.setInternalUrl(url);
  });
}
