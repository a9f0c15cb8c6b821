import type { RemoteReport } from '../sessions/remote-report.js';
import type { RoutingView } from '../routing/routing-reconciler.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { ClusterView } from '../sessions/service-status.js';

// The dashboard row of one node, computed from the connected map (never from
// a flag or a timestamp in the database) plus the persisted teardown history.

export interface NodeRecord {
  id: string;
  name: string;
  decommissioned: boolean;
  lastSeenAt: Date | null;
  unreachableSince: Date | null;
  lastTeardownAt: Date | null;
  lastTeardownReason: string | null;
}

/** Sessions of a node killed by a missing ACK in the last 24 h (from session events; the session's own counter dies with it). */
export type MissedAcks24h = (nodeId: string) => number;

export function sessionRow(node: NodeRecord, registry: SessionRegistry, routing: RoutingView, now: number, missedAcks24h: MissedAcks24h, cluster?: ClusterView) {
  // A panel without its lease (and another live panel) cannot prove its own sessions; another panel's report counts while its lease is live.
  const session = node.decommissioned || (cluster && !cluster.leaseHeld) ? undefined : registry.get(node.id);
  const remote = session || node.decommissioned ? undefined : cluster?.remote.get(node.id);
  if (remote && remote.live && remote.state === 'connected' && remote.panelId !== cluster?.panelId) return remoteRow(node, remote, routing, now, missedAcks24h);
  const teardown = registry.lastTeardown(node.id);
  const lastTeardown = teardown
    ? { at: new Date(teardown.at).toISOString(), reason: teardown.reason, code: teardown.code }
    : node.lastTeardownAt
      ? { at: node.lastTeardownAt.toISOString(), reason: node.lastTeardownReason, code: null }
      : null;
  const state = node.decommissioned
    ? 'decommissioned'
    : session
      ? 'connected'
      : node.lastSeenAt || lastTeardown
        ? 'unreachable'
        : 'never_connected';
  const r = routing.forNode(node.id);
  return {
    nodeId: node.id,
    nodeName: node.name,
    state,
    sessionId: session?.id ?? null,
    peer: session?.peer ?? null,
    agentVersion: session?.agentVersion ?? null,
    connectedSince: session ? new Date(session.openedAt).toISOString() : null,
    lastFrameAgeMs: session ? now - session.lastFrameAt : null,
    heartbeats: session?.heartbeats ?? 0,
    lastHeartbeatSeq: session && session.lastHeartbeatSeq >= 0 ? session.lastHeartbeatSeq : null,
    pingsSent: session?.pingsSent ?? 0,
    pongs: session?.pongs ?? 0,
    missedAcks: session?.missedAcks ?? 0,
    missedAcks24h: missedAcks24h(node.id),
    invalidFrames: session?.invalidFrames ?? 0,
    runtime: session?.report?.runtime ?? null,
    unreachableSince: state === 'unreachable' ? (teardown ? new Date(teardown.at).toISOString() : (node.unreachableSince?.toISOString() ?? null)) : null,
    lastSeenAt: session ? new Date(session.lastFrameAt).toISOString() : (node.lastSeenAt?.toISOString() ?? null),
    routing: { desiredHash: r.desiredHash, appliedHash: r.appliedHash, drifting: r.drifting },
    reloads: { today: r.reloadsToday, total: r.reloadsTotal, lastAt: r.lastReloadAt, lastReason: r.lastReloadReason, kinds: r.reloadKinds },
    canary: r.canary
      ? {
          connected: r.canary.connected,
          dropsToday: r.canary.dropsToday,
          dropsTotal: r.canary.dropsTotal,
          causesToday: r.canary.causesToday,
          lastDropAt: r.canary.lastDropAt,
          lastDropCause: r.canary.lastDropCause,
        }
      : null,
    pushes: r.pushes,
    lastTeardown,
    ...(cluster ? { panelId: session ? cluster.panelId : null, source: session ? ('session' as const) : null } : {}),
  };
}

/** The row of a node whose live session another panel holds, from that panel's report. */
function remoteRow(node: NodeRecord, remote: RemoteReport, routing: RoutingView, now: number, missedAcks24h: MissedAcks24h) {
  const extra = remote.extra;
  const r = routing.forNode(node.id);
  return {
    nodeId: node.id,
    nodeName: node.name,
    state: 'connected',
    sessionId: remote.sessionId,
    peer: extra.peer,
    agentVersion: extra.agentVersion,
    connectedSince: extra.openedAt === null ? null : new Date(extra.openedAt).toISOString(),
    lastFrameAgeMs: Math.max(0, now - remote.lastFrameAt),
    heartbeats: extra.heartbeats,
    lastHeartbeatSeq: remote.session?.lastHeartbeatSeq ?? null,
    pingsSent: remote.session?.pingsSent ?? 0,
    pongs: remote.session?.pongs ?? 0,
    missedAcks: extra.missedAcks,
    missedAcks24h: missedAcks24h(node.id),
    invalidFrames: remote.session?.invalidFrames ?? 0,
    runtime: remote.runtime,
    unreachableSince: null,
    lastSeenAt: new Date(remote.lastFrameAt).toISOString(),
    routing: { desiredHash: r.desiredHash, appliedHash: remote.routing?.appliedHash ?? null, drifting: r.desiredHash !== null && remote.routing?.appliedHash !== r.desiredHash },
    reloads: {
      today: remote.routing?.reloadsToday ?? 0,
      total: remote.routing?.reloadsTotal ?? 0,
      lastAt: remote.routing?.lastReloadAt ?? null,
      lastReason: remote.routing?.lastReloadReason ?? null,
      kinds: null,
    },
    canary: null,
    pushes: { sent: 0, applied: 0, failed: 0 },
    lastTeardown: null,
    panelId: remote.panelId,
    source: remote.source,
  };
}
