import type { FastifyInstance } from 'fastify';
import { withDeadline } from './db/db-faults.js';
import type { ApiDeps } from './domain/api-deps.js';
import { auditRoutes } from './http/audit.js';
import { requireAuth } from './http/auth.js';
import { cliDownloadRoutes } from './http/cli-download.js';
import { dashboardRoutes } from './http/dashboard.js';
import { deploymentEventRoutes } from './http/deployment-events.js';
import { deploymentRoutes } from './http/deployments.js';
import { healthRoutes } from './http/health.js';
import { internalLogRoutes } from './http/internal-logs.js';
import { internalReportRoutes } from './http/internal-reports.js';
import { logRoutes } from './http/logs.js';
import { metricsRoutes } from './http/metrics.js';
import { nodeRoutes } from './http/nodes.js';
import { panelStatusRoutes } from './panel-status-route.js';
import type { installRateLimits } from './http/rate-limits.js';
import { registryRoutes } from './http/registries.js';
import { reloadRoutes } from './http/reloads.js';
import { routeRoutes } from './http/routes.js';
import { serviceRoutes } from './http/services.js';
import { sessionRoutes } from './http/sessions.js';
import { statusRoutes } from './http/status.js';
import { teamRoutes } from './http/teams.js';
import { tokenRoutes } from './http/tokens.js';
import { volumeRoutes } from './http/volumes.js';
import type { Slots } from './lifecycle.js';
import type { PanelMetrics } from './panel-metrics.js';
import type { PanelStatus } from './panel-status.js';
import type { AppDependencies, PanelParts } from './panel-parts.js';
import type { Keyring } from './secrets/keyring.js';
import { liveRoutingOf } from './status/route-health.js';
import { SessionVolumeRemover } from './dispatch/volume-remover.js';

// Every HTTP route of the panel, one plugin per resource: health and metrics,
// the REST API under /v1 (one context that authenticates every request once,
// in onRequest, before a body is read; an operator-only route adds
// requireOperator), the internal surface for other panels, the fleet page.

export interface RouteDeps {
  deps: AppDependencies;
  parts: PanelParts;
  metrics: PanelMetrics;
  keyring: Keyring | null;
  lifecycle: Slots;
  signInLimit: Awaited<ReturnType<typeof installRateLimits>>;
  /** What can be observed of the background parts (panel-status.ts), served at GET /v1/panel. */
  status: PanelStatus;
}

export async function registerPanelRoutes(app: FastifyInstance, { deps, parts, metrics, keyring, lifecycle, signInLimit, status }: RouteDeps): Promise<void> {
  const { prisma, config } = deps;
  const { agents, cluster, events, changes, held, fleet } = parts;
  await app.register(healthRoutes, {
    // Its own short deadline: a frozen database makes /readyz 503 in time, never a hang.
    checkReady: async () => {
      await withDeadline(prisma.$queryRaw`SELECT 1`, config.db.readyTimeoutMs, 'the database');
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
  const api: ApiDeps = { prisma, events, dispatcher: parts.dispatcher, keyring, volumes: new SessionVolumeRemover(agents.registry), liveRouting, placesLater: config.scheduler.allocations };
  await app.register(
    async (v1) => {
      v1.addHook('onRequest', requireAuth);
      await v1.register(teamRoutes, api);
      await v1.register(tokenRoutes, api);
      await v1.register(nodeRoutes, { ...api, holdsSession: (nodeId: string) => agents.registry.get(nodeId) !== undefined });
      await v1.register(serviceRoutes, api);
      await v1.register(volumeRoutes, api);
      await v1.register(routeRoutes, api);
      await v1.register(registryRoutes, api);
      await v1.register(auditRoutes, api);
      await v1.register(deploymentRoutes, { ...api, changes, held });
      await v1.register(logRoutes, { prisma, registry: agents.registry, relay: agents.logs, held, followIdleMs: config.logs.followIdleMs, ...(cluster ? { remoteLogs: cluster.logs } : {}) });
      await v1.register(deploymentEventRoutes, { prisma, changes, held, drainGraceMs: config.deployments.drainReportGraceMs, lifecycle });
      await v1.register(sessionRoutes, {
        prisma,
        registry: agents.registry,
        routing: agents.routing,
        missedAcks24h: (nodeId) => fleet.directory.snapshot.missedAcks24h.get(nodeId) ?? 0,
        nodes: { read: () => fleet.directory.nodes() },
        ...(cluster ? { cluster } : {}),
      });
      await v1.register(reloadRoutes, { prisma, routing: agents.routing });
      await v1.register(panelStatusRoutes, { status });
      await v1.register(statusRoutes, {
        prisma,
        registry: agents.registry,
        ...(cluster ? { cluster } : {}),
        // Issue 36: what this panel's last allocations set to a node left out, shown on those replicas.
        leftOut: (nodeId) => agents.allocations.leftOut(nodeId),
      });
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
    await app.register(internalLogRoutes, { prefix: '/internal/v1', ...internal, prisma, relay: agents.logs, followIdleMs: config.logs.followIdleMs });
  }
  await app.register(dashboardRoutes, {
    prisma,
    fleet,
    publicUrl: config.publicUrl,
    dbDeadlineMs: config.dashboard.dbDeadlineMs,
    signInLimit,
    leftOut: (nodeId) => agents.allocations.leftOut(nodeId),
    onSignedOut: (claim) => events.emit('cookie.signed-out', { cookieId: claim.id, expiresAtMs: claim.expiresAt * 1000 }),
  });
}
