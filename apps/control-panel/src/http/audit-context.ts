import type { FastifyRequest } from 'fastify';
import type { AuditContext } from '../audit/audit-entry.js';

/**
 * Who made a request and from where, for the audit trail. `request.ip` is the
 * socket's peer unless it is one of TETHER_TRUSTED_PROXIES (then the address
 * that proxy names in X-Forwarded-For); `request.id` is unique across panels.
 */
export function auditOf(request: FastifyRequest): AuditContext {
  const auth = request.auth;
  return {
    actor: { tokenId: auth?.tokenId ?? null, name: auth?.name ?? null, kind: auth?.role ?? null },
    teamId: auth?.teamId ?? null,
    requestId: request.id,
    sourceAddress: request.ip ?? null,
  };
}
