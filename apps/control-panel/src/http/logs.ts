import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import Type, { type Static } from 'typebox';
import { sanitizeText } from '@tether/common';
import { CAPABILITIES, LOG_LIMITS } from '@tether/protocol';
import type { Db } from '../db/database.js';
import { teamScope } from '../domain/access.js';
import { AppError } from '../errors.js';
import { LOG_STREAM_END_CODES, type LogRelay, type LogRequest } from '../log-streams/log-relay.js';
import { pipeRemoteLogs, refusalOf, type RemoteLogs } from '../log-streams/log-proxy.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { AgentSession } from '../sessions/session.js';
import { authOf } from './auth.js';
import type { HeldStreams } from './held-streams.js';
import { authErrors, errorResponses, IdParams, security } from './schemas.js';

// GET /v1/services/:id/logs: the service's container output, carried over
// its node's session (see log-streams/log-relay.ts), as newline-delimited
// JSON. Everything that can be refused is refused before the stream starts,
// in the API's error shape; from then on every line is JSON and the last one
// (unless the client left) says why the stream ended.

export interface LogRoutesOptions {
  prisma: Db;
  registry: SessionRegistry;
  relay: LogRelay;
  /** Several panels: streams of nodes whose session another panel holds (cluster/, wired in panel-routes.ts). */
  remoteLogs?: RemoteLogs;
  /** Where each stream is held by its token, so a revocation ends it. */
  held: HeldStreams;
  /** A follow without a line for this long ends (TETHER_LOG_FOLLOW_IDLE_MS). */
  followIdleMs: number;
}

const REVOKED_REASON = 'the token that opened this stream was revoked';

const DURATION = /^(\d{1,6})(s|m|h|d)$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `since` as an RFC 3339 UTC time: given as one, or as a duration back from now (`10m`). */
export function parseSince(value: string, now = Date.now()): string | null {
  const duration = DURATION.exec(value);
  if (duration) return new Date(now - Number(duration[1]) * UNIT_MS[duration[2] as keyof typeof UNIT_MS]).toISOString();
  if (!RFC3339.test(value) || Number.isNaN(Date.parse(value))) return null;
  // Keep nanoseconds when given in UTC (Docker compares them); other offsets are converted (milliseconds).
  return value.endsWith('Z') ? value : new Date(value).toISOString();
}

export const LogQuery = Type.Object(
  {
    tail: Type.Optional(Type.Integer({ minimum: 0, maximum: LOG_LIMITS.maxTail, description: `the last N lines over all replicas (default and most: ${LOG_LIMITS.maxTail})` })),
    since: Type.Optional(Type.String({ maxLength: 64, description: 'RFC 3339 time, or a duration back from now: 30s, 10m, 2h, 1d' })),
    follow: Type.Optional(Type.Union([Type.Literal('1'), Type.Literal('0'), Type.Literal('true'), Type.Literal('false')], { description: 'keep streaming new lines until the client leaves' })),
  },
  { additionalProperties: false },
);

export const logRoutes: FastifyPluginAsyncTypebox<LogRoutesOptions> = async (app, { prisma, registry, relay, remoteLogs, held, followIdleMs }) => {
  app.get(
    '/services/:id/logs',
    {
      schema: {
        tags: ['logs'],
        summary: "A service's container output, over its node's session",
        description:
          'application/x-ndjson: one JSON object per line. `{"type":"log","replica","containerId","stream","time","text"}` for each line ' +
          '(text sanitised: invalid UTF-8 replaced, control characters escaped); `{"type":"notice","code","reason"}` when the rate cap holds the stream back; ' +
          'a last `{"type":"end","code","reason"}` says why it ended (END_OF_LOGS, SESSION_ENDED, …). ' +
          '503 NODE_UNREACHABLE at once when the node has no live session; 409 SERVICE_PENDING when the service has no node yet; 429 LOG_STREAMS_EXHAUSTED at the per-node cap. ' +
          "A node whose session another panel holds: that panel's stream, passed on with the same answers; " +
          '503 OWNER_PANEL_UNREACHABLE / OWNER_PANEL_NO_INTERNAL_URL when it cannot be asked, and a last line OWNER_PANEL_LOST if it stops answering mid-stream.',
        security,
        params: IdParams,
        querystring: LogQuery,
        response: {
          200: { description: 'newline-delimited JSON', content: { 'application/x-ndjson': { schema: Type.String() } } },
          ...authErrors(404, 503),
          ...errorResponses(409, 429, 501),
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      const auth = authOf(request);
      const service = await prisma.service.findFirst({
        where: { id, ...teamScope(auth) },
        select: { id: true, name: true, teamId: true, nodeId: true, node: { select: { name: true } } },
      });
      if (!service) throw new AppError('NOT_FOUND', 'no such service');
      const node = homeOf(service);
      const logRequest = logRequestOf(service.id, request.query);
      const session = registry.get(node.id);
      if (session) {
        const stop = serveLocalLogs(reply, relay, session, node.name, logRequest, { teamId: service.teamId, followIdleMs });
        const h = held.hold(auth, 'logs', () => stop(LOG_STREAM_END_CODES.TOKEN_REVOKED, REVOKED_REASON));
        reply.raw.once('close', () => held.release(h));
        return;
      }
      // Another panel may hold the node's session: its stream, passed on with the same answers.
      const abort = new AbortController();
      // A client that leaves while the owner is asked ends that request too (no stream read for nobody).
      reply.raw.once('close', () => abort.abort());
      const remote = await remoteLogs?.open(node.id, logRequest, abort.signal);
      if (!remote) throw new AppError('NODE_UNREACHABLE', `node ${node.name} has no live session; its logs are unreachable until it rejoins`);
      if (remote.upstream.statusCode !== 200) throw await refusalOf(remote.panelId, remote.upstream);
      reply.hijack();
      const res = reply.raw;
      const h = held.hold(auth, 'logs', () => {
        abort.abort();
        if (!res.writableEnded) res.end(`${JSON.stringify({ type: 'end', code: LOG_STREAM_END_CODES.TOKEN_REVOKED, reason: REVOKED_REASON })}\n`);
      });
      try {
        await pipeRemoteLogs(res, remote.panelId, remote.upstream, abort);
      } finally {
        held.release(h);
      }
    },
  );
};

/** The query as the relay (and another panel's internal surface) takes it; `since` refused unless a time or duration. */
/** The node whose session carries a service's logs: its home; a service without one has no container anywhere yet. */
export function homeOf(service: { nodeId: string | null; node: { name: string } | null }): { id: string; name: string } {
  if (service.nodeId === null || service.node === null) throw new AppError('SERVICE_PENDING', 'the service has no node yet: its replicas wait for an eligible node, so it has no logs');
  return { id: service.nodeId, name: service.node.name };
}

export function logRequestOf(serviceId: string, query: Static<typeof LogQuery>): LogRequest {
  const since = query.since === undefined ? null : parseSince(query.since);
  if (since === null && query.since !== undefined) {
    throw new AppError('VALIDATION_FAILED', 'since must be an RFC 3339 time or a duration such as 30s, 10m, 2h, 1d');
  }
  return { serviceId, tail: query.tail ?? null, since, follow: query.follow === '1' || query.follow === 'true' };
}

/**
 * A stream from this panel's own session of the node: refused (501) for an agent without logs, else relayed as
 * NDJSON. Returns what ends it from the panel's side (with an end line).
 */
export function serveLocalLogs(
  reply: FastifyReply,
  relay: LogRelay,
  session: AgentSession,
  nodeName: string,
  request: LogRequest,
  bounds: { teamId: string; followIdleMs: number },
): (code: string, reason: string) => void {
  if (!session.hasCapability(CAPABILITIES.LOGS)) {
    throw new AppError('LOGS_NOT_SUPPORTED', `the agent on node ${nodeName} (version ${session.agentVersion}) does not stream logs`);
  }
  const res = reply.raw;
  const write = (value: unknown) => res.write(`${JSON.stringify(value)}\n`);
  let done = false;
  // A follow that carries no line for followIdleMs ends (LOG_FOLLOW_IDLE); until then a notice line every quarter
  // of it (at most 30 s) tells the client and any proxy between that the stream is alive.
  let idle: NodeJS.Timeout | undefined;
  let keepAlive: NodeJS.Timeout | undefined;
  const quiet = () => {
    clearTimeout(idle);
    clearInterval(keepAlive);
  };
  const armIdle = () => {
    if (!request.follow || done) return;
    quiet();
    idle = setTimeout(() => relay.end(stream, LOG_STREAM_END_CODES.LOG_FOLLOW_IDLE, `no line for ${bounds.followIdleMs} ms (TETHER_LOG_FOLLOW_IDLE_MS); follow again`), bounds.followIdleMs);
    keepAlive = setInterval(() => write({ type: 'notice', code: LOG_STREAM_END_CODES.LOG_KEEPALIVE, reason: 'no new lines yet' }), Math.min(30_000, bounds.followIdleMs / 4));
  };
  const stream = relay.open(session, request, {
    lines(lines, taken) {
      if (done) return;
      armIdle();
      const text = lines
        .map((l) => JSON.stringify({ type: 'log', replica: l.replica, containerId: l.containerId, stream: l.stream, time: l.time, text: sanitizeText(l.text) }))
        .join('\n');
      if (res.write(`${text}\n`)) taken();
      else res.once('drain', taken);
    },
    notice(code, reason) {
      if (!done) write({ type: 'notice', code, reason });
    },
    end(code, reason) {
      if (done) return;
      done = true;
      quiet();
      res.end(`${JSON.stringify({ type: 'end', code, reason })}\n`);
    },
  }, bounds.teamId);
  reply.hijack();
  res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
  // Headers now: a follow on a quiet service has no line to carry them for a while.
  res.flushHeaders();
  // The client left (or the connection broke): the agent stops reading.
  res.once('close', () => {
    quiet();
    if (!done) {
      done = true;
      relay.close(stream);
    }
  });
  armIdle();
  return (code, reason) => relay.end(stream, code, reason);
}
