import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import type { Db } from '../db/database.js';
import { isDatabaseUnavailable } from '../db/db-faults.js';
import { awaitsDrain, DRAIN_REPORT_GRACE_MS, isFinal, visibleDeployment, watchDeployment } from '../domain/deployment-watch.js';
import { presentDeployment } from '../domain/deployments.js';
import { authOf } from './auth.js';
import { authErrors, errorResponses, IdParams, security } from './schemas.js';
import type { HeldStreams } from './held-streams.js';
import type { DeploymentChanges } from '../domain/deployment-changes.js';
import type { Slots } from '../lifecycle.js';

// GET /v1/deployments/:id/events: a deployment's states as server-sent
// events, from the state it is in now to a final one. Access is checked (and
// 404 answered in the API's error shape) before the stream starts; from then
// on the reply is a raw text/event-stream.

export interface DeploymentEventOptions {
  prisma: Db;
  /** When the row is read again (a NOTIFY of its id, the shared sweep). */
  changes: DeploymentChanges;
  /** A comment line this often keeps proxies from closing a quiet stream. */
  keepAliveMs?: number;
  /** Where each stream is held by its token (capped, ended on revocation). */
  held: HeldStreams;
  /** How long past its drainSeconds a stream waits for a drain report (tests shorten it). */
  drainGraceMs?: number;
  /** The open streams' slot in the panel's lifecycle (lifecycle.ts): they end when the panel stops. */
  lifecycle: Slots;
}

/** One SSE frame; `data` is a single JSON line, so it never needs splitting. */
const frame = (event: string, id: number, data: unknown) => `event: ${event}\nid: ${id}\ndata: ${JSON.stringify(data)}\n\n`;

export const deploymentEventRoutes: FastifyPluginAsyncTypebox<DeploymentEventOptions> = async (app, { prisma, changes, keepAliveMs = 15_000, held, drainGraceMs = DRAIN_REPORT_GRACE_MS, lifecycle }) => {
  // Open streams end when the panel closes (a hijacked reply would otherwise hold the server open).
  const open = new Set<AbortController>();
  lifecycle.provide('deployment-event-streams', { stop: () => open.forEach((c) => c.abort()) });
  app.get(
    '/deployments/:id/events',
    {
      schema: {
        tags: ['deployments'],
        summary: "A deployment's states as server-sent events, until it is final (and its drain reported)",
        description:
          'text/event-stream. Each event is `event: deployment` with the deployment as JSON in `data` plus `"final": true|false`; ' +
          'the first is the state it is in now, then one per change. The stream ends after a final state ' +
          '(running, failed, superseded, unreachable, ack_timeout), with `event: gone` when the deployment is deleted with its service, ' +
          'or with `event: error` (`{ code, message }`: DATABASE_UNAVAILABLE, INTERNAL) when the row cannot be read. ' +
          'A deployment that reached running on an agent that reports its drain (`reportsDrain`: it announced workload.drain) keeps the stream open ' +
          'past running until the drain ended, then `event: drained` with the deployment (connectionsOpenAtSwitch, connectionsCut, drainEndedAt) ends it; ' +
          'drainEndedAt null in it: the agent did not report within drainSeconds + TETHER_DRAIN_REPORT_GRACE_MS (660 s) of running. For any other deployment the stream ends as before.',
        security,
        params: IdParams,
        response: {
          200: { description: 'server-sent events', content: { 'text/event-stream': { schema: Type.String() } } },
          ...authErrors(404),
          ...errorResponses(429),
        },
      },
    },
    async (request, reply) => {
      const auth = authOf(request);
      const first = await visibleDeployment(prisma, auth, request.params.id);
      const controller = new AbortController();
      let revoked = false;
      const h = held.hold(auth, 'events', () => {
        revoked = true;
        controller.abort();
      });
      open.add(controller);
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
      const stop = () => controller.abort();
      request.raw.once('close', stop);
      res.once('close', stop);
      const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), keepAliveMs);
      let seq = 0;
      let last: typeof first | null = null;
      try {
        for await (const row of watchDeployment(prisma, first, { changes, signal: controller.signal, drainGraceMs })) {
          // A change of the drain alone (its report) is not another state: it is the drained event below.
          const drainedNow = last !== null && awaitsDrain(last) && !awaitsDrain(row) && last.status === row.status;
          if (!drainedNow) res.write(frame('deployment', ++seq, { ...presentDeployment(row), final: isFinal(row.status) }));
          last = row;
        }
        if (controller.signal.aborted) return;
        // Still awaiting its drain when the watch ended: the wait ran out, or the row is gone.
        const gone = !last || !isFinal(last.status) || (awaitsDrain(last) && !(await prisma.deployment.findUnique({ where: { id: first.id }, select: { id: true } })));
        if (gone) res.write(frame('gone', ++seq, { id: first.id, reason: 'the deployment was deleted with its service' }));
        // It ran on an agent that reports drains: reported (or the wait for it ended, drainEndedAt null).
        else if (last!.reportsDrain && last!.runningAt !== null) res.write(frame('drained', ++seq, { ...presentDeployment(last!), final: true }));
      } catch (err) {
        request.log.warn({ err, deploymentId: first.id }, 'deployment event stream failed');
        // The stream ends with the code the API would answer (a database outage is not a bug); the client reads again later.
        const code = isDatabaseUnavailable(err) ? 'DATABASE_UNAVAILABLE' : 'INTERNAL';
        if (!controller.signal.aborted) res.write(frame('error', ++seq, { code, message: 'reading the deployment failed; read it again' }));
      } finally {
        if (revoked) res.write(frame('error', ++seq, { code: 'UNAUTHORIZED', message: 'the token that opened this stream was revoked' }));
        held.release(h);
        clearInterval(keepAlive);
        open.delete(controller);
        request.raw.off('close', stop);
        res.off('close', stop);
        res.end();
      }
    },
  );
};
