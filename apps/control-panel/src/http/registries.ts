import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { auditOf } from './audit-context.js';
import { authOf } from './auth.js';
import { authErrors, id, IdParams, NoContent, security, Timestamp } from './schemas.js';
import type { ApiDeps } from '../domain/api-deps.js';
import { createRegistry, deleteRegistry, getRegistry, listRegistries, replaceRegistry } from '../domain/registries.js';

// A team's private registries: the credentials the agent pulls the team's images with.
// The password is write-only: no answer carries it.

const RegistrySchema = Type.Object({
  id: Type.String(),
  teamId: Type.String(),
  host: Type.String({ description: 'normalised: lower-case, port kept; docker.io, index.docker.io and registry-1.docker.io are all docker.io' }),
  username: Type.String(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const Host = Type.String({ minLength: 1, maxLength: 260, description: 'registry host with an optional :port (e.g. ghcr.io, registry.example.com:5000, docker.io)' });
const Username = Type.String({ minLength: 1, maxLength: 256 });
const Password = Type.String({ minLength: 1, maxLength: 4096, description: 'write-only: stored encrypted, never answered' });

const CreateBody = Type.Object(
  { teamId: Type.Optional(id('the owning team: required for operators, implied for customers')), host: Host, username: Username, password: Password },
  { additionalProperties: false },
);
const ReplaceBody = Type.Object({ host: Host, username: Username, password: Password }, { additionalProperties: false });

/** Registries: customers manage their team's, operators everyone's. */
export const registryRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  app.post(
    '/registries',
    {
      schema: {
        tags: ['registries'],
        summary: "Add a team's credentials for a private image registry (one per team and host)",
        security,
        body: CreateBody,
        response: { 201: RegistrySchema, ...authErrors(404, 409) },
      },
    },
    async (request, reply) => reply.status(201).send(await createRegistry(deps.prisma, deps.keyring, authOf(request), request.body, auditOf(request))),
  );

  app.get(
    '/registries',
    {
      schema: {
        tags: ['registries'],
        summary: "List registries, never a password (customers: their team's)",
        security,
        querystring: Type.Object({ teamId: Type.Optional(id('only this team (operators)')) }, { additionalProperties: false }),
        response: { 200: Type.Array(RegistrySchema), ...authErrors() },
      },
    },
    async (request) => listRegistries(deps.prisma, authOf(request), request.query),
  );

  app.get(
    '/registries/:id',
    {
      schema: { tags: ['registries'], summary: 'Read a registry, never its password', security, params: IdParams, response: { 200: RegistrySchema, ...authErrors(404) } },
    },
    async (request) => getRegistry(deps.prisma, authOf(request), request.params.id),
  );

  app.put(
    '/registries/:id',
    {
      schema: {
        tags: ['registries'],
        summary: "Replace a registry's host, username and password; the next frame to an agent carries the new ones",
        security,
        params: IdParams,
        body: ReplaceBody,
        response: { 200: RegistrySchema, ...authErrors(404, 409) },
      },
    },
    async (request) => replaceRegistry(deps.prisma, deps.keyring, authOf(request), request.params.id, request.body, auditOf(request)),
  );

  app.delete(
    '/registries/:id',
    {
      schema: { tags: ['registries'], summary: 'Delete a registry; later pulls of its host go without credentials', security, params: IdParams, response: { 204: NoContent, ...authErrors(404) } },
    },
    async (request, reply) => {
      await deleteRegistry(deps.prisma, authOf(request), request.params.id, auditOf(request));
      return reply.status(204).send();
    },
  );
};
