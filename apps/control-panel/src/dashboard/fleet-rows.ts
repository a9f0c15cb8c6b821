import { CLOSE_CODES, closeCodeName } from '@tether/protocol';
import type { RoutingView } from '../routing/routing-reconciler.js';
import type { FleetRow, FleetState, UnreachableReason } from '@tether/fleet-wire';
import { upReplicas } from '../node-health/container-verdict.js';
import { nodeHealth, type HealthSources } from '../node-health/node-health.js';
import type { DirectoryNode, DirectorySnapshot } from '../node-health/node-directory.js';
import { routeHealth } from '../status/route-health.js';
import type { RoutingStatus } from '@tether/protocol';

// One fleet-page row per node: a presenter of the node's health
// (node-health/node-health.ts decides the state and what proves it; the
// page's word for `connected` is `reachable`), every other column from what
// the live session reported (route counts: status/route-health.ts). Times
// are ms since epoch so the browser can tick ages itself.

export type { FleetRow, FleetState, UnreachableReason } from '@tether/fleet-wire';

export function reasonOf(code: number | null): UnreachableReason | null {
  if (code === null) return null;
  if (code === CLOSE_CODES.IDLE_TIMEOUT) return 'idle timeout';
  if (code === CLOSE_CODES.ACK_TIMEOUT) return 'ACK timeout';
  if (code === CLOSE_CODES.SUPERSEDED) return 'superseded';
  return 'closed';
}

export interface RowSources extends HealthSources {
  routing: RoutingView;
  heartbeatMs: number;
}

const FLEET_STATE = { connected: 'reachable', unreachable: 'unreachable', never_connected: 'never_connected', decommissioned: 'decommissioned' } as const satisfies Record<string, FleetState>;

export function fleetRow(node: DirectoryNode, dir: DirectorySnapshot, src: RowSources): FleetRow {
  const health = nodeHealth(node, src);
  const { local, remote } = health;
  const session = local
    ? { id: local.id, openedAt: local.openedAt, lastFrameAt: local.lastFrameAt, report: local.report }
    : remote
      ? { id: remote.sessionId, openedAt: remote.extra.openedAt, lastFrameAt: remote.lastFrameAt, report: remote.runtime ? { runtime: remote.runtime, containers: remote.containers } : null }
      : undefined;
  const desired = dir.services.get(node.id) ?? [];
  const routing = src.routing.forNode(node.id);
  const state: FleetState = FLEET_STATE[health.state];

  let running: number | null = null;
  let unhealthy = 0;
  const report = session?.report;
  if (report?.runtime.available) {
    running = 0;
    for (const service of desired) if (upReplicas(report.containers, service.id) >= service.replicas) running++;
    for (const c of report.containers) if (c.health === 'unhealthy' && c.state === 'running') unhealthy++;
  }
  const unreachable = state === 'unreachable';
  const teardown = src.registry.lastTeardown(node.id);
  const code = health.teardown?.code ?? null;
  const detail = teardown ? `${closeCodeName(teardown.code) ?? teardown.code}: ${teardown.reason}` : node.lastTeardownReason;
  const routes = session ? routeCounts(session.id, local ? (local.report?.routing ?? null) : (remote?.routing ?? null)) : undefined;
  return {
    id: node.id,
    name: node.name,
    state,
    since: health.unreachableSince,
    reason: unreachable ? (reasonOf(code) ?? 'closed') : null,
    reasonDetail: unreachable ? detail : null,
    sessionId: session?.id ?? null,
    connectedSince: session?.openedAt ?? null,
    lastFrameAt: session?.lastFrameAt ?? node.lastSeenAt,
    heartbeatMs: session ? src.heartbeatMs : null,
    missedAcks24h: dir.missedAcks24h.get(node.id) ?? 0,
    services: { running, desired: desired.length, ...(unhealthy > 0 ? { unhealthy } : {}) },
    runtime: report ? { available: report.runtime.available, error: report.runtime.error } : null,
    reloadsToday: routing.reloadsToday,
    lastReloadReason: routing.lastReloadReason,
    routing: { desiredHash: routing.desiredHash, appliedHash: routing.appliedHash, drifting: routing.drifting },
    ...(routes ? { routes } : {}),
    allocations: dir.allocations.get(node.id) ?? { count: 0, lastStatusAt: null },
    cordoned: node.cordoned ?? false,
    evacuating: node.evacuating ?? false,
    lostAt: node.lostAt ?? null,
    labels: node.labels ?? {},
  };
}

/** How many of the session's probed routes serve and fail now, and how many certificates have an error; undefined when it probes none. */
function routeCounts(sessionId: string, routing: RoutingStatus | null): FleetRow['routes'] {
  const probes = routing?.probes;
  if (!probes || probes.length === 0) return undefined;
  const now = Date.now();
  const counts = { serving: 0, failing: 0, certificateErrors: 0 };
  for (const probe of probes) {
    const state = routeHealth(probe, { sessionId, routing }, now).state;
    if (state === 'serving') counts.serving++;
    else if (state === 'failing') counts.failing++;
    if (probe.certificate?.lastError) counts.certificateErrors++;
  }
  return counts;
}

/**
 * Every node's row, in the directory's order, then the nodes the directory
 * has not read yet but a session showed (`seen`: a node that connected while
 * the database was slow or down must not vanish from the page when its
 * session ends). `seen` loses the nodes the directory now has.
 */
export function fleetRows(dir: DirectorySnapshot, src: RowSources, seen: Map<string, DirectoryNode>): FleetRow[] {
  const rows = dir.nodes.map((n) => fleetRow(n, dir, src));
  if (seen.size > 0) {
    for (const [id, node] of seen) {
      if (dir.byId.has(id)) seen.delete(id);
      else rows.push(fleetRow(node, dir, src));
    }
  }
  return rows;
}
