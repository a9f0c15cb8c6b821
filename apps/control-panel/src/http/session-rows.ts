import type { RemoteReport } from '../sessions/remote-report.js';
import type { RoutingView } from '../routing/routing-reconciler.js';
import { nodeHealth, type HealthSources, type NodeFacts } from '../node-health/node-health.js';

// GET /v1/sessions and a node's current session: a presenter of the node's
// health (node-health/node-health.ts decides the state and what proves it)
// with the session's counters and the routing view. The REST word for a live
// node is `connected`.

/** Sessions of a node killed by a missing ACK in the last 24 h (from session events; the session's own counter dies with it). */
export type MissedAcks24h = (nodeId: string) => number;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function sessionRow(node: NodeFacts, src: HealthSources, routing: RoutingView, now: number, missedAcks24h: MissedAcks24h) {
  const health = nodeHealth(node, src);
  if (health.remote) return remoteRow(node, health.remote, routing, now, missedAcks24h);
  const session = health.local ?? undefined;
  const lastTeardown = health.teardown ? { at: new Date(health.teardown.at).toISOString(), reason: health.teardown.reason, code: health.teardown.code } : null;
  const state = health.state;
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
    unreachableSince: iso(health.unreachableSince),
    lastSeenAt: iso(session ? session.lastFrameAt : node.lastSeenAt),
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
    ...(src.cluster ? { panelId: session ? src.cluster.panelId : null, source: session ? ('session' as const) : null } : {}),
  };
}

/** The row of a node whose live session another panel holds, from that panel's report. */
function remoteRow(node: NodeFacts, remote: RemoteReport, routing: RoutingView, now: number, missedAcks24h: MissedAcks24h) {
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
