import type { FastifyPluginAsync } from 'fastify';
import { Nullable } from '@tether/common';
import Type from 'typebox';
import type { PanelStatus } from './panel-status.js';
import { requireOperator } from './http/auth.js';
import { authErrors, security } from './http/schemas.js';

// GET /v1/panel: the one observability surface of this panel's background
// parts (panel-status.ts), served to operators as a snapshot: what tests read
// through app.panelStatus is what an operator reads here. Connections per
// address are left out (an unbounded set of keys). A root file beside
// panel-status.ts, which reads http/'s parts: inside http/ it made a cycle.

const Count = Type.Integer({ minimum: 0 });

const PanelStatusBody = Type.Object({
  outbox: Type.Object({ pending: Count, replayed: Count, spilled: Count }),
  heldStreams: Type.Object({ wait: Count, events: Count, logs: Count }),
  deploymentWatches: Type.Object({ watched: Count, sweeps: Count }),
  nodeTokenQueries: Count,
  database: Type.Object({ server: Nullable(Type.String()), timeline: Count, failovers: Count, staleRefused: Count, fencedTimeline: Count }),
  ownership: Nullable(Type.Object({ panelId: Type.String(), leaseHeld: Type.Boolean(), othersSeen: Type.Boolean(), listening: Type.Boolean() })),
  scheduler: Nullable(
    Type.Object({
      leaseHeld: Type.Boolean(),
      epoch: Nullable(Count),
      failover: Nullable(
        Type.Object(
          {
            brake: Nullable(
              Type.Object(
                {
                  reason: Type.String({ description: 'TOO_MANY_UNREACHABLE, MANY_UNREACHABLE_RECENTLY (one grace after too many were), PANEL_STARTED or DATABASE_RECOVERED' }),
                  unreachable: Type.Optional(Count),
                  nodes: Type.Optional(Count),
                  until: Type.Optional(Type.Number({ description: 'epoch ms (database clock) when it lifts by itself' })),
                },
                { description: 'why nothing is re-placed off unreachable nodes now; null: failover acts' },
              ),
            ),
            lost: Type.Array(Type.String(), { description: 'nodes counted lost (names)' }),
            unreachable: Type.Array(Type.String(), { description: 'nodes unreachable, not (yet) lost (names)' }),
            deferred: Count,
            replaced: Count,
          },
          { description: "as of the holder's last evaluation; null on a panel that has not evaluated" },
        ),
      ),
    }),
  ),
});

export function panelStatusSnapshot(status: PanelStatus) {
  const { outbox, deploymentWatches, ownership } = status;
  return {
    outbox: { pending: outbox.pending, replayed: outbox.replayed, spilled: outbox.spilled },
    heldStreams: { wait: status.heldStreams('wait'), events: status.heldStreams('events'), logs: status.heldStreams('logs') },
    deploymentWatches: { watched: deploymentWatches.watched, sweeps: deploymentWatches.sweeps },
    nodeTokenQueries: status.nodeTokenQueries,
    database: { ...status.database },
    scheduler: status.scheduler
      ? { leaseHeld: status.scheduler.leaseHeld, epoch: status.scheduler.epoch, failover: status.scheduler.failover ? { ...status.scheduler.failover, brake: status.scheduler.failover.brake ? { ...status.scheduler.failover.brake } : null } : null }
      : null,
    ownership: ownership
      ? { panelId: ownership.panelId, leaseHeld: ownership.leaseHeld, othersSeen: ownership.othersSeen, listening: ownership.listening }
      : null,
  };
}

/** GET /v1/panel: this panel's background parts, as app.panelStatus holds them (operators). */
export const panelStatusRoutes: FastifyPluginAsync<{ status: PanelStatus }> = async (app, opts) => {
  app.get(
    '/panel',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['status'],
        summary: "This panel's background parts: session-fact outbox, held streams, watched deployments, ownership",
        security,
        response: { 200: PanelStatusBody, ...authErrors(403) },
      },
    },
    async () => panelStatusSnapshot(opts.status),
  );
};
