import Type, { type Static } from 'typebox';
import { Compile } from 'typebox/compile';
import { Nullable } from '@tether/common';
import { ContainerState, RoutingStatus, RuntimeStatus } from '@tether/protocol';
import type { RemoteReport } from './remote-report.js';
import type { AgentSession } from './session.js';

// What the owner of a node's session tells another panel that asks over the
// internal surface (POST /internal/v1/live-reports): its live session's facts
// as of the answer, with ages instead of times, so the panels' wall clocks
// never enter (a skewed clock would shift every age). The asking panel counts
// the age from when it *sent* the request: never younger than the truth, and
// older by at most the round trip (bounded by TETHER_PANEL_PEER_TIMEOUT_MS).

export const LiveReport = Type.Object({
  nodeId: Type.String(),
  sessionId: Type.String(),
  generation: Type.Integer({ minimum: 0 }),
  lastFrameAgeMs: Type.Integer({ minimum: 0 }),
  /** Null before the first report (hello carries one, so rarely). */
  reportAgeMs: Nullable(Type.Integer({ minimum: 0 })),
  /** Present only when asked for (status reads need them, session health does not). */
  containers: Type.Optional(Type.Array(ContainerState)),
  runtime: Nullable(RuntimeStatus),
  routing: Nullable(RoutingStatus),
  peer: Type.String(),
  agentVersion: Type.String(),
  openedAgeMs: Type.Integer({ minimum: 0 }),
  heartbeats: Type.Integer({ minimum: 0 }),
  lastHeartbeatSeq: Nullable(Type.Integer()),
  pingsSent: Type.Integer({ minimum: 0 }),
  pongs: Type.Integer({ minimum: 0 }),
  missedAcks: Type.Integer({ minimum: 0 }),
  invalidFrames: Type.Integer({ minimum: 0 }),
});
export type LiveReport = Static<typeof LiveReport>;

export const LiveReportRequest = Type.Object(
  {
    nodeIds: Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 100_000 }),
    containers: Type.Boolean(),
  },
  { additionalProperties: false },
);

/** Only the nodes whose live session the answering panel holds (and may vouch for) are listed. */
export const LiveReportAnswer = Type.Object({ panelId: Type.String(), reports: Type.Array(LiveReport) });
export type LiveReportAnswer = Static<typeof LiveReportAnswer>;

export const checkLiveReportAnswer = Compile(LiveReportAnswer);

export function liveReportOf(session: AgentSession, generation: number, withContainers: boolean, now = Date.now()): LiveReport {
  const r = session.report;
  return {
    nodeId: session.nodeId,
    sessionId: session.id,
    generation,
    lastFrameAgeMs: Math.max(0, now - session.lastFrameAt),
    reportAgeMs: r ? Math.max(0, now - r.at) : null,
    ...(withContainers ? { containers: r?.containers ?? [] } : {}),
    runtime: r?.runtime ?? null,
    routing: r?.routing ?? null,
    peer: session.peer,
    agentVersion: session.agentVersion,
    openedAgeMs: Math.max(0, now - session.openedAt),
    heartbeats: session.heartbeats,
    lastHeartbeatSeq: session.lastHeartbeatSeq >= 0 ? session.lastHeartbeatSeq : null,
    pingsSent: session.pingsSent,
    pongs: session.pongs,
    missedAcks: session.missedAcks,
    invalidFrames: session.invalidFrames,
  };
}

/**
 * The report row overlaid with the owner's live answer: times on this panel's clock, counted from `sentAt`
 * (when the request left), so ages here are the owner's plus at most the round trip.
 */
export function withLiveReport(row: RemoteReport, live: LiveReport, sentAt: number): RemoteReport {
  return {
    ...row,
    sessionId: live.sessionId,
    generation: live.generation,
    state: 'connected',
    lastFrameAt: sentAt - live.lastFrameAgeMs,
    updatedAt: live.reportAgeMs === null ? row.updatedAt : sentAt - live.reportAgeMs,
    containers: live.containers ?? row.containers,
    runtime: live.runtime,
    routing: live.routing,
    extra: {
      peer: live.peer,
      agentVersion: live.agentVersion,
      openedAt: sentAt - live.openedAgeMs,
      heartbeats: live.heartbeats,
      missedAcks: live.missedAcks,
    },
    session: { lastHeartbeatSeq: live.lastHeartbeatSeq, pingsSent: live.pingsSent, pongs: live.pongs, invalidFrames: live.invalidFrames },
    source: 'owner',
  };
}
