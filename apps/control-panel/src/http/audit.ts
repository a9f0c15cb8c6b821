import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Nullable } from '@tether/common';
import Type from 'typebox';
import { authOf } from './auth.js';
import { authErrors, id, ID_PATTERN, security, Timestamp } from './schemas.js';
import type { ApiDeps } from '../domain/api-deps.js';
import { AUDIT_ACTIONS } from '../audit/audit-actions.js';
import { listAudit } from '../domain/audit-query.js';

const NullableString = Nullable(Type.String());

const AuditItem = Type.Object({
  id: Type.String(),
  at: Timestamp,
  actor: Type.Object({ tokenId: NullableString, name: NullableString, kind: NullableString }),
  teamId: NullableString,
  action: Type.String(),
  target: Type.Object({ type: Type.String(), id: NullableString }),
  outcome: Type.String({ enum: ['success', 'refused'] }),
  code: Nullable(Type.String({ description: 'the error code of a refusal' })),
  requestId: NullableString,
  sourceAddress: NullableString,
});

const Query = Type.Object(
  {
    from: Type.Optional(Type.String({ format: 'date-time', description: 'rows at or after this time' })),
    to: Type.Optional(Type.String({ format: 'date-time', description: 'rows before this time' })),
    actor: Type.Optional(id('the acting token id')),
    targetType: Type.Optional(Type.String({ pattern: '^[a-z]{1,32}$' })),
    targetId: Type.Optional(
      Type.String({
        pattern: `^${ID_PATTERN}(?:/[A-Za-z_][A-Za-z0-9_]{0,255})?$`,
        description: "the target's id, or `<serviceId>/<NAME>` for a secret's rows (what `tether audit --target secret/<serviceId>/<NAME>` sends)",
      }),
    ),
    action: Type.Optional(Type.String({ enum: [...AUDIT_ACTIONS] })),
    outcome: Type.Optional(Type.Union([Type.Literal('success'), Type.Literal('refused')])),
    teamId: Type.Optional(id('only this team (operators)')),
    limit: Type.Integer({ minimum: 1, maximum: 500, default: 100 }),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9_-]+$' })),
  },
  { additionalProperties: false },
);

/** The audit trail: operators read every row, a customer its team's. */
export const auditRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  app.get(
    '/audit',
    {
      schema: {
        tags: ['audit'],
        summary: "Who changed what, newest first (customers: their team's)",
        security,
        querystring: Query,
        response: { 200: Type.Object({ items: Type.Array(AuditItem), nextCursor: NullableString }), ...authErrors() },
      },
    },
    async (request) => listAudit(deps.prisma, authOf(request), request.query),
  );
};
