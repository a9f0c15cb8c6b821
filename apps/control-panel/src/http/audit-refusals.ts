import type { FastifyInstance, FastifyRequest } from 'fastify';
import { auditOf } from './audit-context.js';
import { unstorableField } from '../db/stored-text.js';
import type { SessionFactOutbox } from '../session-writes/outbox.js';
import { ROUTE_ACTIONS } from '../audit/audit-actions.js';
import { auditRow, type AuditActor } from '../audit/audit-entry.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The fleet page's signed-in token, for its sign-in and sign-out rows (set by http/dashboard.ts). */
    auditActor?: AuditActor;
  }
}

// Refused actions, and the fleet page's sign-ins and sign-outs, go through the
// ordered session-fact writer: they happen (and must be recorded) while the
// database is down too, when tokens are checked from the cache. A refusal is
// recorded for a caller whose token was valid; a request without one names no
// actor and would let anyone fill the trail.

const codeOf = (payload: unknown): string | null => {
  if (typeof payload !== 'string' || !payload.startsWith('{"error"')) return null;
  try {
    return (JSON.parse(payload) as { error?: { code?: unknown } }).error?.code?.toString() ?? null;
  } catch {
    return null;
  }
};

export function recordRefusalsAndSignIns(app: FastifyInstance, outbox: SessionFactOutbox): void {
  const codes = new WeakMap<FastifyRequest, string | null>();
  app.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode >= 400) codes.set(request, codeOf(payload));
    return payload;
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = ROUTE_ACTIONS[`${request.method} ${request.routeOptions.url ?? ''}`];
    if (!route) return;
    const refused = reply.statusCode >= 400;
    const signing = route.targetType === 'dashboard';
    // Success rows of API changes are written in their own transactions; the fleet page's sign-ins here.
    if (!refused && !signing) return;
    const code = refused ? (codes.get(request) ?? `HTTP_${reply.statusCode}`) : null;
    if (code && route.afterChange?.includes(code)) return;
    const ctx = auditOf(request);
    // The fleet page's cookie names its token (dashboard.ts sets request.auditActor on sign-in).
    const actor = request.auditActor ?? ctx.actor;
    if (!actor.tokenId) return;
    const params = request.params as Record<string, string> | undefined;
    const sent = route.idParam ? (params?.[route.idParam] ?? null) : null;
    // A refused request's id is what the caller sent: text the database cannot store (a NUL) is left out, not a lost row.
    const targetId = sent !== null && unstorableField(sent, 'id') === null ? sent : null;
    const row = auditRow({ ...ctx, actor }, { action: route.action, targetType: route.targetType, targetId }, refused ? 'refused' : 'success', code);
    outbox.submit({ kind: 'audit', row }).catch((err: unknown) => request.log.warn({ err, action: route.action }, 'audit row not recorded'));
  });
}
