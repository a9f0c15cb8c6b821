import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { auditOf } from './audit-context.js';
import { authOf, requireOperator } from './auth.js';
import { authErrors, IdParams, labelName, security, Timestamp } from './schemas.js';
import type { ApiDeps } from '../domain/api-deps.js';
import { createTeam, getTeam, listTeams } from '../domain/teams.js';

export const TeamSchema = Type.Object({ id: Type.String(), name: Type.String(), createdAt: Timestamp });

/** Teams: operators create and list them; a customer may read its own. */
export const teamRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  app.post(
    '/teams',
    {
      onRequest: requireOperator,
      schema: {
        tags: ['teams'],
        summary: 'Create a team (operators)',
        security,
        body: Type.Object({ name: labelName() }, { additionalProperties: false }),
        response: { 201: TeamSchema, ...authErrors(403, 409) },
      },
    },
    async (request, reply) => reply.status(201).send(await createTeam(deps.prisma, request.body.name, auditOf(request))),
  );

  app.get(
    '/teams',
    {
      onRequest: requireOperator,
      schema: { tags: ['teams'], summary: 'List teams (operators)', security, response: { 200: Type.Array(TeamSchema), ...authErrors(403) } },
    },
    async () => listTeams(deps.prisma),
  );

  app.get(
    '/teams/:id',
    {
      schema: {
        tags: ['teams'],
        summary: 'Read a team (operators; customers their own)',
        security,
        params: IdParams,
        response: { 200: TeamSchema, ...authErrors(404) },
      },
    },
    async (request) => getTeam(deps.prisma, authOf(request), request.params.id),
  );
};
