import { CLOSE_CODES, closeCodeName } from '@tether/protocol';
import type { RoutingView } from '../routing/routing-reconciler.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { RemoteReport } from '../sessions/remote-report.js';
import type { FleetRow, FleetState, UnreachableReason } from '@tether/fleet-wire';
import type { DirectoryNode, DirectorySnapshot } from './node-directory.js';

// One fleet-page row per node: reachability comes from the connected map only
// (the directory is history: who exists, why it last went away), every other
// column from what the live session reported. Times are ms since epoch so the
// browser can tick ages itself.

export type { FleetRow, FleetState, UnreachableReason } from '@tether/fleet-wire';

export function reasonOf(code: number | null): UnreachableReason | null {
  if (code === null) return null;
  if (code === CLOSE_CODES.IDLE_TIMEOUT) return 'idle timeout';
  if (code === CLOSE_CODES.ACK_TIMEOUT) return 'ACK timeout';
  if (code === CLOSE_CODES.SUPERSEDED) return 'superseded';
  return 'closed';
}

export interface RowSources {
  registry: SessionRegistry;
  routing: RoutingView;
  heartbeatMs: number;
  /** Several panels: the node's live session on another panel, from that panel's report. */
  elsewhere?: (nodeId: string) => RemoteReport | undefined;
}

export function fleetRow(node: DirectoryNode, dir: DirectorySnapshot, src: RowSources): FleetRow {
  const local = node.decommissioned ? undefined : src.registry.get(node.id);
  const remote = local || node.decommissioned ? undefined : src.elsewhere?.(node.id);
  const session = local
    ? { id: local.id, openedAt: local.openedAt, lastFrameAt: local.lastFrameAt, report: local.report }
    : remote
      ? { id: remote.sessionId, openedAt: remote.extra.openedAt, lastFrameAt: remote.lastFrameAt, report: remote.runtime ? { runtime: remote.runtime, containers: remote.containers } : null }
      : undefined;
  const teardown = src.registry.lastTeardown(node.id);
  const desired = dir.services.get(node.id) ?? [];
  const routing = src.routing.forNode(node.id);
  let state: FleetState;
  if (node.decommissioned) state = 'decommissioned';
  else if (session) state = 'reachable';
  else if (teardown || node.lastSeenAt !== null || node.lastTeardownAt !== null) state = 'unreachable';
  else state = 'never_connected';

  let running: number | null = null;
  const report = session?.report;
  if (report?.runtime.available) {
    running = 0;
    for (const service of desired) {
      let up = 0;
      for (const c of report.containers) if (c.serviceId === service.id && c.state === 'running' && c.health !== 'unhealthy') up++;
      if (up >= service.replicas) running++;
    }
  }
  const unreachable = state === 'unreachable';
  const code = teardown?.code ?? node.lastCloseCode;
  const detail = teardown ? `${closeCodeName(teardown.code) ?? teardown.code}: ${teardown.reason}` : node.lastTeardownReason;
  return {
    id: node.id,
    name: node.name,
    state,
    since: unreachable ? (teardown?.at ?? node.unreachableSince ?? node.lastTeardownAt) : null,
    reason: unreachable ? (reasonOf(code) ?? 'closed') : null,
    reasonDetail: unreachable ? detail : null,
    sessionId: session?.id ?? null,
    connectedSince: session?.openedAt ?? null,
    lastFrameAt: session?.lastFrameAt ?? node.lastSeenAt,
    heartbeatMs: session ? src.heartbeatMs : null,
    missedAcks24h: dir.missedAcks24h.get(node.id) ?? 0,
    services: { running, desired: desired.length },
    runtime: report ? { available: report.runtime.available, error: report.runtime.error } : null,
    reloadsToday: routing.reloadsToday,
    lastReloadReason: routing.lastReloadReason,
    routing: { desiredHash: routing.desiredHash, appliedHash: routing.appliedHash, drifting: routing.drifting },
  };
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

/** A node as a session shows it, before the directory has read it. */
export function seenNode(id: string, name: string): DirectoryNode {
  return { id, name, decommissioned: false, lastSeenAt: null, unreachableSince: null, lastTeardownAt: null, lastTeardownReason: null, lastCloseCode: null };
}
