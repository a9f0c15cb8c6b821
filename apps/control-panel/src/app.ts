import path from 'node:path';
import websocket from '@fastify/websocket';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { PANEL_VERSION_HEADER } from '@tether/common';
import { MAX_PAYLOAD_BYTES } from '@tether/protocol';
import { NodeAuthenticator } from './agent-gateway/authenticate.js';
import { agentGateway } from './agent-gateway/gateway.js';
import { SessionGenerations } from './sessions/generations.js';
import { createAgentSide, type AgentSide } from './agent-side.js';
import type { PanelConfig } from './config.js';
import type { Db } from './db/database.js';
import { withDeadline } from './db/db-faults.js';
import type { ApiDeps } from './domain/api-deps.js';
import { createLoop } from '@tether/common';
import { newRequestId } from './audit/audit-entry.js';
import { AUDIT_RETENTION_INTERVAL_MS, pruneAudit } from './audit/audit-query.js';
import { recordRefusalsAndSignIns } from './audit/refusals.js';
import { auditRoutes } from './http/audit.js';
import { loadKeyring, type Keyring } from './secrets/keyring.js';
import { AppError, ErrorBodySchema } from './errors.js';
import { authPlugin, requireAuth } from './http/auth.js';
import { deploymentEventRoutes } from './http/deployment-events.js';
import { createFleet } from './dashboard/fleet.js';
import { cliDownloadRoutes } from './http/cli-download.js';
import { dashboardRoutes, SECURITY_HEADERS } from './http/dashboard.js';
import { deploymentRoutes } from './http/deployments.js';
import { ConnectionCap } from './http/connection-cap.js';
import { edgeServerOptions, installJsonBodyParser, refuseCappedConnections, refuseContentEncodings, requestDeadlineOptions } from './http/edges.js';
import { installErrorHandler } from './http/error-handler.js';
import { installRequestGuards } from './http/request-guards.js';
import { healthRoutes } from './http/health.js';
import { HeldStreams } from './http/held-streams.js';
import { installRateLimits } from './http/rate-limits.js';
import { DeploymentChanges } from './domain/deployment-changes.js';
import { internalLogRoutes } from './http/internal-logs.js';
import { internalReportRoutes } from './http/internal-reports.js';
import { logRoutes } from './http/logs.js';
import { metricsRoutes } from './http/metrics.js';
import { nodeRoutes } from './http/nodes.js';
import { registerOpenApi } from './http/openapi.js';
import { reloadRoutes } from './http/reloads.js';
import { routeRoutes } from './http/routes.js';
import { liveRoutingOf } from './sessions/route-health.js';
import { registryRoutes } from './http/registries.js';
import { serviceRoutes } from './http/services.js';
import { volumeRoutes } from './http/volumes.js';
import { sessionRoutes } from './http/sessions.js';
import { statusRoutes } from './http/status.js';
import { teamRoutes } from './http/teams.js';
import { tokenRoutes } from './http/tokens.js';
import { partAwareSchemaController } from './http/validation.js';
import { PanelEvents } from './panel-events.js';
import { createMetrics, type PanelMetrics } from './panel-metrics.js';
import type { RoutingMapSource } from './routing/routing-map.js';
import type { DeploymentDispatcher } from './sessions/session-dispatcher.js';
import { PanelCluster } from './ownership/cluster.js';
import { ClusterDispatcher } from './ownership/cluster-dispatcher.js';
import { SessionVolumeRemover } from './sessions/volume-remover.js';
import { PrismaFactWriter } from './session-writes/fact-writer.js';
import { ORPHANED_REASON } from './session-writes/facts.js';
import { SessionFactOutbox } from './session-writes/outbox.js';
import { SpillFile } from './session-writes/spill-file.js';
import { watchOutbox } from './session-writes/outbox-metrics.js';
import { OutboxSessionStore, type SessionStore } from './sessions/session-store.js';
import { dialableUrl, separateInternalSurface } from './http/internal-listener.js';

/** Shown in the OpenAPI document. */
export const PANEL_VERSION = '0.1.0';

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

declare module 'fastify' {
  interface FastifyInstance {
    /** The agent side (connected map, dispatch, workload sync, routing push), for tests and benches. */
    agentSide: AgentSide;
    /** The one ordered writer of session facts, for tests. */
    sessionFacts: SessionFactOutbox;
    /** The agent upgrade's token check, for tests (its query count). */
    nodeAuthenticator: NodeAuthenticator;
    /** Connections per source address before authentication (tests read what each address holds). */
    connectionCap: ConnectionCap;
    /** Which watched deployments changed (NOTIFY, rescan, sweep), for tests. */
    deploymentChanges: DeploymentChanges;
    /** What each token holds open (waits, event streams, log follows), for tests. */
    heldStreams: HeldStreams;
    /** This panel among the panels sharing the database (undefined without a database URL). */
    cluster: PanelCluster | undefined;
  }
}

/**
 * Builds the panel's HTTP app from its dependencies: every HTTP plugin is
 * registered here, and the agent side is made, started and stopped here.
 * Nothing here reads the environment or listens.
 */
export async function buildApp(deps: AppDependencies): Promise<FastifyInstance> {
  const keyring = deps.keyring !== undefined ? deps.keyring : loadKeyring(deps.config.secretsKeys);
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    // Unique across panels (the audit trail's requestId); never taken from the client.
    genReqId: newRequestId,
    // Only these proxies' X-Forwarded-For is believed (the audit trail's sourceAddress).
    ...(deps.config.audit.trustedProxies.length > 0 ? { trustProxy: deps.config.audit.trustedProxies } : {}),
    bodyLimit: 1024 * 1024,
    // Bodies strict ("5" is not a number), query strings and params converted.
    schemaController: partAwareSchemaController(),
    // Malformed HTTP, undecodable URLs and over-long path parameters answer in the API's error shape.
    ...edgeServerOptions,
    ...requestDeadlineOptions(deps.config.http.bodyTimeoutMs),
  });
  const metrics = deps.metrics ?? createMetrics();
  // Before any hook reads a request: an address over its cap is refused before its token is looked at.
  const connections = new ConnectionCap(deps.config.http.maxConnectionsPerAddress);
  const detachCap = connections.attach(app.server);
  app.decorate('connectionCap', connections);
  app.addHook('onClose', async () => detachCap());
  refuseCappedConnections(app, connections, () => metrics.edgeRefusals.inc({ code: 'TOO_MANY_CONNECTIONS' }));
  // TETHER_INTERNAL_LISTEN: /internal/v1 only on its own listener (server.ts listens on it), 404 on the public one.
  app.decorate('internalListener', deps.config.http.internalListen ? separateInternalSurface(app) : undefined);
  app.addSchema(ErrorBodySchema);
  installErrorHandler(app);
  // The API speaks JSON only; a text body is 415 UNSUPPORTED_MEDIA_TYPE, not a string that fails validation.
  app.removeContentTypeParser('text/plain');
  installJsonBodyParser(app);
  refuseContentEncodings(app);
  installRequestGuards(app);
  // Before any route, so the OpenAPI document sees them all.
  await registerOpenApi(app, PANEL_VERSION);
  const { db } = deps.config;
  // Session facts (opens, closes, deployment transitions, reloads, last-seen and last-used times): one ordered writer.
  const outbox = new SessionFactOutbox({
    writer: new PrismaFactWriter(deps.prisma, { maxWait: db.connectTimeoutMs, timeout: db.queryTimeoutMs * 2 }),
    spill: new SpillFile(path.join(deps.config.dataDir, 'outbox', 'session-facts.jsonl')),
    logger: app.log,
    retryMaxMs: deps.config.outbox.retryMaxMs,
    maxPending: deps.config.outbox.maxPending,
  });
  app.decorate('sessionFacts', outbox);
  recordRefusalsAndSignIns(app, outbox);
  app.addHook('onSend', async (request, reply) => void reply.header('x-request-id', request.id));
  const events = deps.events ?? new PanelEvents();
  watchOutbox(metrics, outbox);
  await app.register(authPlugin, {
    prisma: deps.prisma,
    lastUsedFlushMs: deps.config.tokenLastUsedFlushMs,
    cacheMs: deps.config.tokenCacheMs,
    outbox,
  });
  // Before every route (they are counted in onRequest, before a token is looked up).
  const signInLimit = await installRateLimits(app, deps.config.http.rateLimits, (hash) => app.authenticator.knows(hash));

  const store = new OutboxSessionStore(deps.prisma, outbox, db.connectTimeoutMs + db.queryTimeoutMs);
  // Several panels on one database: lease, claims before welcome, signals, shared reports, dispatch across panels.
  const databaseUrl = deps.databaseUrl ?? deps.config.databaseUrl;
  // Made before both sides: the cluster records each claim's generation, the registry fences session facts with it.
  const generations = new SessionGenerations();
  const agents = createAgentSide({
    config: deps.config,
    prisma: deps.prisma,
    store: deps.wrapSessionStore ? deps.wrapSessionStore(store) : store,
    outbox,
    events,
    metrics,
    logger: app.log,
    keyring,
    ...(deps.routingMaps ? { maps: deps.routingMaps } : {}),
    ...(databaseUrl ? { generations } : {}),
  });
  app.decorate('agentSide', agents);
  let dispatcher: DeploymentDispatcher = deps.dispatcher ?? agents.dispatcher;
  let cluster: PanelCluster | undefined;
  if (databaseUrl) {
    // The cross-panel dispatcher needs the cluster's lease and signals, so it is made after it and the
    // cluster's deployment signals are routed to it (deployTo) before the cluster starts.
    const made: PanelCluster = new PanelCluster({
      prisma: deps.prisma,
      databaseUrl,
      panelId: deps.config.panel.id,
      internalUrl: deps.config.panel.internalUrl,
      leaseMs: deps.config.panel.leaseMs,
      peerTimeoutMs: deps.config.panel.peerTimeoutMs,
      connectTimeoutMs: db.connectTimeoutMs,
      queryTimeoutMs: db.queryTimeoutMs,
      registry: agents.registry,
      frames: agents.frames,
      events,
      outbox,
      logger: app.log,
      generations,
    });
    cluster = made;
    const cross = new ClusterDispatcher({
      local: dispatcher,
      registry: agents.registry,
      lease: made.lease,
      signals: made.signals,
      prisma: deps.prisma,
      store,
      ackTimeoutMs: deps.config.sessions.ackTimeoutMs,
      logger: app.log,
    });
    made.deployTo(cross);
    dispatcher = cross;
  }
  app.decorate('cluster', cluster);
  // Deployment watchers wake when their row is written (NOTIFY from a trigger), not on a timer.
  const changes = new DeploymentChanges(deps.prisma, {
    sweepMs: deps.config.deployments.sweepMs,
    pollMs: deps.config.deployments.watchPollMs,
    logger: app.log,
  });
  if (cluster) {
    const { signals } = cluster;
    changes.listening = () => signals.listening;
    signals.on('deployment', (id) => changes.changed([id]));
    signals.on('connected', () => changes.rescan());
  }
  app.decorate('deploymentChanges', changes);
  app.addHook('onReady', async () => changes.start());
  app.addHook('preClose', async () => changes.stop());
  // The fleet page and the per-node metrics: rows from the connected map plus cached database facts.
  const fleet = createFleet({
    config: deps.config,
    prisma: deps.prisma,
    registry: agents.registry,
    routing: agents.routing,
    metrics,
    logger: app.log,
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
  // A revoked token, here or (signalled) on another panel: its streams and waits end, no cache honours it.
  const held = new HeldStreams(deps.config.streams);
  app.decorate('heldStreams', held);
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
  cluster?.signals.on('connected', () => void recheckHeld().catch((err: unknown) => app.log.warn({ err }, 'revocation rescan failed')));
  // No internal URL configured: the address this panel listens on (unless a wildcard, which no other panel can dial);
  // with a separate internal listener, that listener's address (server.ts, once it listens).
  app.addHook('onListen', async () => {
    const address = app.server.address();
    if (!cluster || cluster.lease.internalUrl || app.internalListener || !address || typeof address === 'string') return;
    const url = dialableUrl(address);
    if (url) cluster.lease.setInternalUrl(url);
  });
  app.addHook('onReady', async () => {
    // What a previous run spilled is written first, then the sessions it left open are closed, then this run's facts.
    outbox.start();
    const orphaned = { kind: 'sessions.orphaned', reason: ORPHANED_REASON, before: new Date().toISOString() } as const;
    outbox.submit(cluster ? { ...orphaned, panelId: cluster.panelId } : orphaned).catch(() => {});
    // The lease's first renewal is awaited (a database that is out leaves it unheld: no claims until it answers).
    await cluster?.start();
    agents.start();
  });
  // Every answer names the panel's version: the CLI refuses a panel it does not fit before trusting an answer.
  app.addHook('onRequest', async (_request, reply) => {
    reply.header(PANEL_VERSION_HEADER, PANEL_VERSION);
  });
  // Headers on every answer, whatever produced it (a route, the not-found handler, the error handler): HSTS when
  // the panel is reached over https; the fleet page's security headers on every /dashboard answer.
  const hsts = deps.config.publicUrl?.startsWith('https:') ? 'max-age=31536000' : undefined;
  app.addHook('onSend', async (request, reply, payload) => {
    if (hsts) void reply.header('strict-transport-security', hsts);
    if (request.url === '/dashboard' || request.url.startsWith('/dashboard/')) {
      for (const [k, v] of Object.entries(SECURITY_HEADERS)) void reply.header(k, v);
      if (!reply.getHeader('cache-control')) void reply.header('cache-control', 'no-store');
    }
    return payload;
  });
  // A request arriving while the panel stops (a rolling restart) answers 503 NOT_READY, like /readyz, in the API's shape.
  let closing = false;
  app.addHook('onRequest', async () => {
    if (closing) throw new AppError('NOT_READY', 'the panel is shutting down; retry (another panel)');
  });
  // preClose: sessions get GOING_AWAY before the server stops accepting; their closes are written or spilled.
  app.addHook('preClose', async () => {
    closing = true;
    await agents.stop();
    await outbox.stop(db.connectTimeoutMs + db.queryTimeoutMs);
    // The lease is given up last: until the closes are written no other panel's sweep mistakes them for a crash.
    await cluster?.stop();
  });
  app.addHook('onReady', async () => {
    fleet.start();
    // The node list is remembered for GET /v1/sessions during an outage; a database that is out now just leaves it empty.
    await withDeadline(fleet.directory.nodes(), db.queryTimeoutMs, 'the database').catch(() => {});
  });
  app.addHook('preClose', async () => fleet.stop());

  // The agent gateway: GET /v1/agent/connect.
  await app.register(websocket, { options: { maxPayload: MAX_PAYLOAD_BYTES, perMessageDeflate: false } });
  const s = deps.config.sessions;
  const nodeAuth = new NodeAuthenticator(deps.prisma, s.nodeTokenCacheMs);
  app.decorate('nodeAuthenticator', nodeAuth);
  events.on('node.decommissioned', ({ nodeId }) => nodeAuth.forget(nodeId));
  await app.register(agentGateway, {
    prisma: deps.prisma,
    registry: agents.registry,
    frames: agents.frames,
    nodeAuth,
    metrics,
    ...(cluster ? { claim: (nodeId: string, sessionId: string) => cluster.claim(nodeId, sessionId) } : {}),
    protocolVersions: s.protocolVersions,
    maxOpening: s.maxOpening,
    connections,
    // The window a busy panel hints, in seconds: the opens it holds now at its planned rate (at least 1 s).
    busyRetryAfterS: () => Math.max(1, Math.ceil(s.maxOpening / s.restartOpensPerSec)),
    timing: {
      heartbeatIntervalMs: s.heartbeatIntervalMs,
      pingIntervalMs: s.pingIntervalMs,
      panelIdleTimeoutMs: s.idleTimeoutMs,
      agentIdleTimeoutMs: s.agentIdleTimeoutMs,
      ackTimeoutMs: s.ackTimeoutMs,
      helloTimeoutMs: s.helloTimeoutMs,
      sendBufferLimitBytes: s.sendBufferLimitBytes,
    },
  });

  // HTTP: one plugin per resource.
  await app.register(healthRoutes, {
    // Its own short deadline: a frozen database makes /readyz 503 in time, never a hang.
    checkReady: async () => {
      await withDeadline(deps.prisma.$queryRaw`SELECT 1`, db.readyTimeoutMs, 'the database');
      // A panel without its lease claims nothing and dispatches nothing: a load balancer drains it.
      if (cluster && !cluster.lease.held) throw new Error(`panel ${cluster.panelId} does not hold its lease`);
    },
  });
  await app.register(metricsRoutes, { metrics });
  await app.register(cliDownloadRoutes);
  const liveRouting: ApiDeps['liveRouting'] = async (nodes) => {
    // Another panel's report is read only for nodes this panel holds no session of (as status does).
    const view = await cluster?.view(nodes.map((n) => n.id).filter((id) => !agents.registry.get(id)));
    return (node) => liveRoutingOf(node, agents.registry, view);
  };
  const api: ApiDeps = { prisma: deps.prisma, events, dispatcher, keyring, volumes: new SessionVolumeRemover(agents.registry), liveRouting };
  const auditRetention = createLoop({
    name: 'audit-retention',
    intervalMs: AUDIT_RETENTION_INTERVAL_MS,
    run: async () => void (await pruneAudit(deps.prisma, deps.config.audit.retentionDays)),
    onError: (err) => app.log.warn({ err }, 'could not delete old audit rows'),
  });
  app.addHook('onReady', async () => auditRetention.start());
  app.addHook('preClose', async () => auditRetention.stop());
  // The REST API: one plugin per resource, in one context that authenticates every request once, in onRequest
  // (before a body is read); an operator-only route adds requireOperator, which checks that caller's role.
  await app.register(
    async (v1) => {
      v1.addHook('onRequest', requireAuth);
      await v1.register(teamRoutes, api);
      await v1.register(tokenRoutes, api);
      await v1.register(nodeRoutes, api);
      await v1.register(serviceRoutes, api);
      await v1.register(volumeRoutes, api);
      await v1.register(routeRoutes, api);
      await v1.register(registryRoutes, api);
      await v1.register(auditRoutes, api);
      await v1.register(deploymentRoutes, { ...api, changes, held });
      await v1.register(logRoutes, { prisma: deps.prisma, registry: agents.registry, relay: agents.logs, held, followIdleMs: deps.config.logs.followIdleMs, ...(cluster ? { remoteLogs: cluster.logs } : {}) });
      await v1.register(deploymentEventRoutes, { prisma: deps.prisma, changes, held, drainGraceMs: deps.config.deployments.drainReportGraceMs });
      await v1.register(sessionRoutes, {
        prisma: deps.prisma,
        registry: agents.registry,
        routing: agents.routing,
        missedAcks24h: (nodeId) => fleet.directory.snapshot.missedAcks24h.get(nodeId) ?? 0,
        nodes: { read: () => fleet.directory.nodes() },
        ...(cluster ? { cluster } : {}),
      });
      await v1.register(reloadRoutes, { prisma: deps.prisma, routing: agents.routing });
      await v1.register(statusRoutes, { prisma: deps.prisma, registry: agents.registry, ...(cluster ? { cluster } : {}) });
    },
    { prefix: '/v1' },
  );
  if (cluster) {
    // The internal surface: other panels only (their credential, never a token).
    const internal = { registry: agents.registry, verifier: cluster.verifier };
    await app.register(internalReportRoutes, {
      prefix: '/internal/v1',
      ...internal,
      panelId: cluster.panelId,
      generationOf: (sessionId) => cluster.generationOf(sessionId),
      mayServe: () => cluster.lease.mayServe,
    });
    await app.register(internalLogRoutes, { prefix: '/internal/v1', ...internal, prisma: deps.prisma, relay: agents.logs, followIdleMs: deps.config.logs.followIdleMs });
  }
  await app.register(dashboardRoutes, {
    prisma: deps.prisma,
    fleet,
    publicUrl: deps.config.publicUrl,
    dbDeadlineMs: deps.config.dashboard.dbDeadlineMs,
    signInLimit,
    onSignedOut: (claim) => events.emit('cookie.signed-out', { cookieId: claim.id, expiresAtMs: claim.expiresAt * 1000 }),
  });
  return app;
}
