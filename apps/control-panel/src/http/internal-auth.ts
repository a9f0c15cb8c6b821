import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { INTERNAL_HEADER } from '../log-streams/log-proxy.js';

// The internal surface (/internal/v1) is for other panels only: a route opts
// in with `onRequest: requirePanel(verifier)`, which accepts a panel
// credential (cluster/peer-credentials.ts) and nothing else. Customer,
// operator and node tokens are refused like no credential at all: 401.

/** Checks a panel credential (the Authorization header); the calling panel's id, or null. */
export interface PanelVerifier {
  readonly scheme: string;
  verify(header: string | undefined): Promise<string | null>;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The panel that called the internal surface (set by requirePanel). */
    callerPanel?: string;
  }
}

export function requirePanel(verifier: PanelVerifier) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    // Every answer of the surface says it is one, refusals included: a caller tells an older panel's 404 from ours.
    void reply.header(INTERNAL_HEADER, '1');
    const caller = await verifier.verify(request.headers.authorization);
    if (!caller) {
      void reply.header('www-authenticate', verifier.scheme);
      throw new AppError('UNAUTHORIZED', "this is the panels' internal surface: only another panel's credential is accepted");
    }
    request.callerPanel = caller;
  };
}
