import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { SessionRegistry } from '../sessions/registry.js';
import { LiveReportAnswer, LiveReportRequest, liveReportOf, type LiveReport } from '../sessions/live-report.js';
import { requirePanel, type PanelVerifier } from './internal-auth.js';

// POST /internal/v1/live-reports: another panel asks this one, the owner of
// some nodes' sessions, for their live facts (one request per read, all the
// nodes it holds here). Answered from the connected map only: no database,
// nothing written, so reads on other panels cost the database nothing however
// often heartbeats arrive.

export interface InternalReportOptions {
  panelId: string;
  registry: SessionRegistry;
  verifier: PanelVerifier;
  /** The generation a session of this panel claimed (none: not claimed, not vouched for). */
  generationOf(sessionId: string): number | undefined;
  /** This panel may vouch for its sessions (its lease, or alone: cluster/panel-lease.ts `mayServe`). */
  mayServe(): boolean;
}

export const internalReportRoutes: FastifyPluginAsyncTypebox<InternalReportOptions> = async (app, opts) => {
  app.post(
    '/live-reports',
    {
      onRequest: requirePanel(opts.verifier),
      // Up to 100,000 node ids in one read.
      bodyLimit: 8 * 1024 * 1024,
      schema: { hide: true, body: LiveReportRequest, response: { 200: LiveReportAnswer } },
    },
    async (request) => {
      const reports: LiveReport[] = [];
      if (opts.mayServe()) {
        const now = Date.now();
        for (const nodeId of request.body.nodeIds) {
          const session = opts.registry.get(nodeId);
          const generation = session ? opts.generationOf(session.id) : undefined;
          if (session && generation !== undefined) reports.push(liveReportOf(session, generation, request.body.containers, now));
        }
      }
      return { panelId: opts.panelId, reports };
    },
  );
};
