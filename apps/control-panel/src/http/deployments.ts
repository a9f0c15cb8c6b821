import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Nullable } from '@tether/common';
import Type from 'typebox';
import { DeploymentStatus } from '../generated/prisma/enums.js';
import { authOf, requireAuth } from './auth.js';
import { authErrors, IdParams, NullableTimestamp, security, Timestamp } from './schemas.js';
import { createDeployment, getDeployment, listServiceDeployments } from '../domain/deployments.js';
import type { ApiDeps } from '../domain/api-deps.js';

const DeploymentSchema = Type.Object({
  id: Type.String(),
  serviceId: Type.String(),
  nodeId: Type.String(),
  spec: Type.Object(
    {
      name: Type.String(),
      image: Type.String(),
      env: Type.Record(Type.String(), Type.String()),
      internalPort: Nullable(Type.Integer()),
      replicas: Type.Integer(),
    },
    { description: 'the service spec as it was when the deployment was made' },
  ),
  status: Type.Unsafe<DeploymentStatus>({
    type: 'string',
    enum: Object.values(DeploymentStatus),
    description: 'pending until sent; delivered (ACKed), running or failed (reported by the agent), ack_timeout, unreachable, superseded',
  }),
  reason: Nullable(Type.String()),
  sessionId: Nullable(Type.String(), { description: 'the agent session the deployment was sent on' }),
  createdAt: Timestamp,
  dispatchedAt: NullableTimestamp,
  ackedAt: NullableTimestamp,
  finishedAt: NullableTimestamp,
});

/** Deployments: record one of a service's current spec, read them back. */
export const deploymentRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  app.post(
    '/services/:id/deployments',
    {
      onRequest: requireAuth,
      schema: {
        tags: ['deployments'],
        summary: "Deploy the service's current spec to its node",
        description:
          'The deployment is stored (pending) before it is sent. 202: the node received it; 201: recorded, not (yet) delivered. ' +
          'A node without a live session answers 503 NODE_UNREACHABLE, one that does not acknowledge in time 504 ACK_TIMEOUT; ' +
          'either way the deployment ends with that status and reason.',
        security,
        params: IdParams,
        response: { 201: DeploymentSchema, 202: DeploymentSchema, ...authErrors(404, 409, 503, 504) },
      },
    },
    async (request, reply) => {
      const { httpStatus, deployment } = await createDeployment(deps, authOf(request), request.params.id);
      return reply.status(httpStatus).send(deployment);
    },
  );

  app.get(
    '/services/:id/deployments',
    {
      onRequest: requireAuth,
      schema: {
        tags: ['deployments'],
        summary: "A service's deployments, newest first",
        security,
        params: IdParams,
        querystring: Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })) }, { additionalProperties: false }),
        response: { 200: Type.Array(DeploymentSchema), ...authErrors(404) },
      },
    },
    async (request) => listServiceDeployments(deps, authOf(request), request.params.id, request.query.limit ?? 50),
  );

  app.get(
    '/deployments/:id',
    {
      onRequest: requireAuth,
      schema: { tags: ['deployments'], summary: 'Read a deployment', security, params: IdParams, response: { 200: DeploymentSchema, ...authErrors(404) } },
    },
    async (request) => getDeployment(deps, authOf(request), request.params.id),
  );
};
