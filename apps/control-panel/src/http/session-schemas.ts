import { Nullable } from '@tether/common';
import Type from 'typebox';
import { NullableTimestamp, Timestamp } from './schemas.js';
import { RouteCertificateSchema, RouteHealthSchema } from './routes.js';

// Response schemas of the session health and status routes (OpenAPI and
// fast serialisation). Ages are in milliseconds at the time of the answer.

const NullableString = Nullable(Type.String());

/** Several panels: where a live session's facts came from (sessions/remote-report.ts). */
const EvidenceSource = Type.Union([Type.Literal('session'), Type.Literal('owner'), Type.Literal('report-row')], {
  description:
    "`session`: this panel's own session; `owner`: the panel holding it answered just now over its internal URL; " +
    '`report-row`: that panel did not answer, so the report row it last wrote (its frame age may be up to 11 s older than on the owner)',
});
const NullableInt = Nullable(Type.Integer());

export const SessionRow = Type.Object({
  nodeId: Type.String(),
  nodeName: Type.String(),
  state: Type.Union(['connected', 'unreachable', 'never_connected', 'decommissioned'].map((s) => Type.Literal(s))),
  sessionId: Nullable(Type.String(), { description: 'the live session; null when the node has none (unreachable, never connected, decommissioned)' }),
  peer: NullableString,
  agentVersion: NullableString,
  connectedSince: NullableTimestamp,
  lastFrameAgeMs: NullableInt,
  heartbeats: Type.Integer(),
  lastHeartbeatSeq: NullableInt,
  pingsSent: Type.Integer(),
  pongs: Type.Integer(),
  missedAcks: Type.Integer(),
  missedAcks24h: Type.Integer(),
  invalidFrames: Type.Integer(),
  runtime: Nullable(Type.Object({ available: Type.Boolean(), error: NullableString })),
  unreachableSince: NullableTimestamp,
  lastSeenAt: NullableTimestamp,
  routing: Type.Object({ desiredHash: NullableString, appliedHash: NullableString, drifting: Type.Boolean() }),
  reloads: Type.Object({
    today: Type.Integer(),
    total: Type.Integer(),
    lastAt: NullableString,
    lastReason: NullableString,
    /** Per kind (initial, repairEmpty, change, repairDrift, and staticMove from agents with proxy.static); null for agents that do not report them. */
    kinds: Type.Union([Type.Record(Type.String(), Type.Integer()), Type.Null()]),
  }),
  /** The agent's canary through its own proxy: drops today and since start, by cause; null when off. */
  canary: Type.Union([
    Type.Object({ connected: Type.Boolean(), dropsToday: Type.Integer(), dropsTotal: Type.Integer(), causesToday: Type.Record(Type.String(), Type.Integer()), lastDropAt: NullableString, lastDropCause: NullableString }),
    Type.Null(),
  ]),
  /** Routing maps pushed to the node since this panel started. */
  pushes: Type.Object({ sent: Type.Integer(), applied: Type.Integer(), failed: Type.Integer() }),
  lastTeardown: Nullable(Type.Object({ at: Timestamp, reason: NullableString, code: NullableInt })),
  /** The panel holding the live session (several panels on one database); null without one. */
  panelId: Type.Optional(NullableString),
  source: Type.Optional(Nullable(EvidenceSource)),
});

export const SessionList = Type.Object({ sessions: Type.Array(SessionRow) });

export const SessionHistory = Type.Object({
  current: SessionRow,
  events: Type.Array(
    Type.Object({
      sessionId: Type.String(),
      kind: Type.Union([Type.Literal('opened'), Type.Literal('closed')]),
      at: Timestamp,
      reason: NullableString,
      closeCode: NullableInt,
    }),
  ),
});

const Container = Type.Object({
  containerId: Type.String(),
  serviceId: Type.String(),
  deploymentId: Type.String(),
  name: Type.String(),
  state: Type.String(),
  exitCode: NullableInt,
  health: Type.String(),
  restartCount: Type.Integer(),
  since: Type.String(),
  oomKilled: Type.Optional(Type.Boolean({ description: "present and true when the container's last exit was the kernel's OOM kill (its memory limit); the status reason then says OOM_KILLED" })),
  lastProbe: Type.Optional(
    Type.Object(
      {
        at: Type.String(),
        status: NullableInt,
        error: Type.Union([Type.String(), Type.Null()]),
        latencyMs: Type.Integer(),
        body: Type.String({ description: 'the first 200 bytes of the answer, printable ASCII only (other bytes read ?)' }),
      },
      { description: "the service's HTTP health check: the agent's last probe of this container (then health is the check's verdict: starting, healthy or unhealthy; an unhealthy one is named in the status reason with HEALTHCHECK_FAILED)" },
    ),
  ),
});

/** One replica of a service managed by allocations (issue 36), as its node last reported it (docs/api.md, "Status per replica"). */
export const ReplicaStatusSchema = Type.Object({
  allocationId: Nullable(Type.String(), { description: 'null: a replica the scheduler could not place (state pending, code NO_NODE_AVAILABLE or NO_NODE_MATCHES_LABELS)' }),
  node: Nullable(Type.Object({ id: Type.String(), name: Type.String() }), { description: 'null: not placed on any node (pending)' }),
  desired: Type.Union([Type.Literal('run'), Type.Literal('stop')], { description: 'run: one of the replicas; stop: drained and removed by its node, not counted' }),
  state: Type.Union(['pending', 'starting', 'running', 'failed', 'draining', 'removed', 'unknown'].map((s) => Type.Literal(s)), {
    description: 'unknown: no live session proves its node, or the live session has not reported it yet; pending: not started yet, or (allocationId null) waiting for an eligible node',
  }),
  deploymentId: Nullable(Type.String(), { description: 'the release the allocation must run; null: the service has none yet' }),
  runningDeploymentId: Nullable(Type.String(), { description: 'the release its serving container runs; null: none serves, or not reported' }),
  health: Nullable(Type.String(), { description: 'none|starting|healthy|unhealthy, as reported; null: not reported' }),
  code: Nullable(Type.String()),
  reason: Nullable(Type.String()),
  evidence: Nullable(Type.Object({ sessionId: Type.String(), statusAgeMs: Type.Integer() }), {
    description: 'the session whose allocations.status recorded this state, and how long ago it changed; null: never reported',
  }),
  movedFrom: Nullable(
    Type.Object({
      node: Type.Object({ id: Type.String(), name: Type.String() }),
      unreachableSince: Nullable(Type.String({ format: 'date-time' }), { description: 'since when the node had no live session; null: never recorded' }),
      teardownReason: Nullable(Type.String(), { description: "why the node's last session was torn down" }),
      at: Type.String({ format: 'date-time', description: 'when this replica was placed in its stead' }),
      message: Type.String({ description: 'moved from <node> (unreachable since …, torn down for …) to <node> at …' }),
    }),
    { description: "failover (issue 38): this replica was placed in place of a lost node's, as the scheduler recorded it then; null otherwise" },
  ),
});

export const ServiceStatusSchema = Type.Object({
  serviceId: Type.String(),
  name: Type.String(),
  teamId: Type.String(),
  node: Nullable(Type.Object({ id: Type.String(), name: Type.String() }), { description: 'its home node; null while it has none (no node was eligible: every replica pending)' }),
  state: Type.Union(['running', 'degraded', 'down', 'stopped', 'unknown', 'pending'].map((s) => Type.Literal(s)), {
    description: 'pending: it has no node yet and wants replicas (each in allocations, pending with its reason)',
  }),
  desiredReplicas: Type.Integer(),
  runningReplicas: NullableInt,
  unknownReplicas: Type.Integer({ description: "replicas no live session proves: a managed service's run allocations on such nodes; an unmanaged one's desiredReplicas while it is unknown, else 0" }),
  allocations: Type.Array(ReplicaStatusSchema, {
    description: 'one per allocation (run and stop) of a service managed by allocations (its node speaks workload.allocations, or it has no node yet), then one per replica the scheduler could not place (pending, allocationId and node null); empty otherwise',
  }),
  reason: Type.String(),
  containers: Type.Array(Container),
  evidence: Nullable(
    Type.Object({
      sessionId: Type.String(),
      lastFrameAgeMs: Type.Integer(),
      reportAgeMs: Type.Integer(),
      panelId: Type.Optional(Type.String({ description: 'the panel that holds the session (several panels on one database)' })),
      source: Type.Optional(EvidenceSource),
    }),
    {
      description: 'null when no live session proves the state (it is then unknown)',
    },
  ),
  routes: Type.Array(
    Type.Object({
      id: Type.String(),
      domain: Type.String(),
      pathPrefix: Nullable(Type.String()),
      health: RouteHealthSchema,
      certificate: RouteCertificateSchema,
    }),
    { description: "the service's routes with their health and certificate, as GET /v1/routes/:id answers them (docs/api.md, \"Route health\")" },
  ),
});

export const StatusList = Type.Object({ services: Type.Array(ServiceStatusSchema) });
