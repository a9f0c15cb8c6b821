import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Nullable } from '@tether/common';
import Type from 'typebox';
import { TokenRole } from '../generated/prisma/enums.js';
import { auditOf } from './audit-context.js';
import { requireOperator } from './auth.js';
import { authErrors, IdParams, NullableTimestamp, security, Timestamp, TokenName } from './schemas.js';
import type { ApiDeps } from '../domain/api-deps.js';
import { createCustomerToken, listTeamTokens, revokeToken } from '../domain/tokens.js';

const TokenSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  role: Type.Unsafe<TokenRole>({ type: 'string', enum: Object.values(TokenRole) }),
  teamId: Nullable(Type.String()),
  createdAt: Timestamp,
  lastUsedAt: Nullable(Timestamp, { description: 'written in batches, so up to a flush interval old' }),
  revokedAt: NullableTimestamp,
  expiresAt: Nullable(Timestamp, { description: 'refused like a revoked token from then on; null: never' }),
});

const CreatedTokenSchema = Type.Object({
  ...TokenSchema.properties,
  token: Type.String({ description: 'the bearer token; shown in this answer only' }),
});

/** API tokens: operators issue customer tokens per team, list and revoke them. */
export const tokenRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  app.post(
    '/teams/:id/tokens',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['tokens'],
        summary: "Issue a customer token for a team (operators); the token is shown once",
        security,
        params: IdParams,
        body: Type.Object(
          { name: TokenName, expiresAt: Type.Optional(Type.String({ format: 'date-time', description: 'when the token stops working (in the future)' })) },
          { additionalProperties: false },
        ),
        response: { 201: CreatedTokenSchema, ...authErrors(403, 404) },
      },
    },
    async (request, reply) => reply.status(201).send(await createCustomerToken(deps.prisma, request.params.id, request.body.name, auditOf(request), request.body.expiresAt)),
  );

  app.get(
    '/teams/:id/tokens',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['tokens'],
        summary: "List a team's tokens, without the tokens themselves (operators)",
        security,
        params: IdParams,
        response: { 200: Type.Array(TokenSchema), ...authErrors(403, 404) },
      },
    },
    async (request) => listTeamTokens(deps.prisma, request.params.id),
  );

  app.delete(
    '/tokens/:id',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['tokens'],
        summary: 'Revoke a token (operators); it stops working at once',
        security,
        params: IdParams,
        response: { 200: TokenSchema, ...authErrors(403, 404) },
      },
    },
    async (request) => {
      const token = await revokeToken(deps.prisma, request.params.id, auditOf(request));
      // After the commit: this panel's streams and waits of the token end now, the others' on the signal.
      deps.events.emit('token.revoked', { tokenId: token.id });
      return token;
    },
  );
};
