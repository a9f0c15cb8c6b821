import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthContext } from '../domain/access.js';
import { Nullable } from '@tether/common';
import Type from 'typebox';
import { DeploymentStatus } from '../generated/prisma/enums.js';
import { auditOf } from './audit-context.js';
import { authOf } from './auth.js';
import { authErrors, errorResponses, id, IdParams, NullableTimestamp, security, Timestamp } from './schemas.js';
import type { HeldStreams } from './held-streams.js';
import type { DeploymentChanges } from '../domain/deployment-changes.js';
import { AppError } from '../errors.js';
import { createDeployment, getDeployment, listServiceDeployments, presentDeployment } from '../domain/deployments.js';
import type { ApiDeps } from '../domain/api-deps.js';
import { ServiceFieldsOut } from './service-field-schemas.js';
import { isFinal, waitUntilFinal } from '../domain/deployment-watch.js';

const DeploymentSchema = Type.Object({
  id: Type.String(),
  serviceId: Type.String(),
  nodeId: Nullable(Type.String({ description: "the service's home node when the deployment was made; null: it had none yet (its replicas pending), until the scheduler gives it one" })),
  spec: Type.Object(
    {
      name: Type.String(),
      image: Type.String(),
      env: Type.Record(Type.String(), Type.String()),
      internalPort: Nullable(Type.Integer()),
      replicas: Type.Integer(),
      secrets: Type.Optional(
        Type.Array(Type.Object({ name: Type.String(), version: Type.Integer() }), { description: 'the secret versions the deployment runs with (never values)' }),
      ),
      registry: Type.Optional(
        Type.Object(
          { id: Type.String(), host: Type.String() },
          { description: "the team's registry the image is pulled with (its credentials as they are when the deploy is sent; never the password)" },
        ),
      ),
      ...ServiceFieldsOut,
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
  runningAt: Type.Optional(Nullable(Timestamp, { description: 'when it first reached running (kept when it is later superseded or fails); only such a deployment can be rolled back to' })),
  rollbackOf: Type.Optional(Nullable(Type.String(), { description: 'a rollback: the deployment whose spec this one carries' })),
  imageRef: Type.Optional(
    Nullable(Type.String(), { description: 'the image as it ran, pinned (`<repository>@sha256:…`, or the node\'s image id `sha256:…`); a rollback to this deployment runs it. Null until running, and from older agents' }),
  ),
  reportsDrain: Type.Optional(
    Type.Boolean({ description: 'its agent reports the drain after running (it announced workload.drain when the deployment was sent); false: the three drain fields stay null' }),
  ),
  connectionsOpenAtSwitch: Type.Optional(
    Nullable(Type.Integer({ minimum: 0 }), { description: 'proxied requests and streams open on the old containers at the switch; null until reported, or when the node\'s proxy cannot count' }),
  ),
  connectionsCut: Type.Optional(
    Nullable(Type.Integer({ minimum: 0 }), { description: 'of those, still open when the drain deadline (drainSeconds) fell and the old containers were stopped; null as above' }),
  ),
  drainEndedAt: Type.Optional(Nullable(Timestamp, { description: 'when the drain of the old containers ended (the first report wins); null until reported' })),
  final: Type.Optional(Type.Boolean({ description: 'with ?wait: whether the deployment reached a final state before the wait ended' })),
});

/** The longest `?wait=` a POST may ask for, in seconds. */
export const MAX_DEPLOY_WAIT_SECONDS = 600;

const WaitQuery = Type.Object(
  { wait: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_DEPLOY_WAIT_SECONDS, description: 'seconds to wait for a final state' })) },
  { additionalProperties: false },
);

/** Deployments: record one of a service's current spec, read them back. */
export const deploymentRoutes: FastifyPluginAsyncTypebox<ApiDeps & { changes: DeploymentChanges; held: HeldStreams }> = async (app, deps) => {
  app.post(
    '/services/:id/deployments',
    {
      schema: {
        tags: ['deployments'],
        summary: "Deploy the service's current spec to its node",
        description:
          'The deployment is stored (pending) before it is sent. 202: the node received it; 201: recorded, not (yet) delivered. ' +
          'A service managed by allocations (its node announced workload.allocations) answers 201: the scheduler rolls the release out ' +
          'across its nodes one replica at a time and ends it running, or failed naming each node (docs/api.md). ' +
          'A node without a live session answers 503 NODE_UNREACHABLE, one that does not acknowledge in time 504 ACK_TIMEOUT; ' +
          'either way the deployment ends with that status and reason. ' +
          'With `?wait=SECONDS` (1-600) the answer waits until the deployment is final (running, failed, superseded): 200 with `"final": true`; ' +
          'when the wait ends first, 202 with the state it is in and `"final": false`. A wait ends when its client leaves; ' +
          'one token or team holds at most TETHER_STREAMS_PER_TOKEN / TETHER_STREAMS_PER_TEAM waits and event streams (429 STREAMS_EXHAUSTED, nothing deployed); ' +
          'revoking the token ends its waits with 401 UNAUTHORIZED (the deployment goes on).',
        security,
        params: IdParams,
        querystring: WaitQuery,
        response: { 200: DeploymentSchema, 201: DeploymentSchema, 202: DeploymentSchema, ...authErrors(404, 409, 503, 504), ...errorResponses(429) },
      },
    },
    (request, reply) => answerDeploy(request, reply, request.query.wait, (auth) => createDeployment(deps, auth, request.params.id, auditOf(request))),
  );

  app.post(
    '/services/:id/rollback',
    {
      schema: {
        tags: ['deployments'],
        summary: 'Roll the service back to the spec of a deployment that ran',
        description:
          "Writes the spec of `to` (default: the newest deployment before the service's latest one that reached running) back into the service " +
          '(image, env, command, args, resources, volumes, healthCheck, and internalPort unless routes need the current one; replicas, name, node and the ' +
          "secrets' current values stay) and deploys it like POST /v1/services/:id/deployments, answered the same way (`?wait=` too); the new deployment's " +
          '`rollbackOf` names `to`. 409 NO_ROLLBACK_TARGET when no earlier deployment ever ran, 409 ROLLBACK_TARGET_NEVER_RAN when `to` never did, ' +
          "404 when `to` is not this service's deployment. The image is run by the reference recorded (a tag that moved since runs what it names now).",
        security,
        params: IdParams,
        querystring: WaitQuery,
        body: Type.Optional(
          Type.Object({ to: Type.Optional(id('the deployment whose spec to restore')) }, { additionalProperties: false }),
        ),
        response: { 200: DeploymentSchema, 201: DeploymentSchema, 202: DeploymentSchema, ...authErrors(404, 409, 503, 504), ...errorResponses(429) },
      },
    },
    (request, reply) =>
      answerDeploy(request, reply, request.query.wait, (auth) => createDeployment(deps, auth, request.params.id, auditOf(request), { ...(request.body?.to ? { to: request.body.to } : {}) })),
  );

  /** A deploy's answer: at once, or with `?wait=` once it is final (or the wait ended). */
  async function answerDeploy(request: FastifyRequest, reply: FastifyReply, wait: number | undefined, create: (auth: AuthContext) => Promise<{ httpStatus: number; deployment: ReturnType<typeof presentDeployment> }>) {
    const auth = authOf(request);
    if (wait === undefined) {
      const { httpStatus, deployment } = await create(auth);
      return reply.status(httpStatus).send(deployment);
    }
    // Held (and capped) before anything is recorded: a 429 STREAMS_EXHAUSTED deploys nothing.
    const stop = new AbortController();
    let revoked = false;
    const held = deps.held.hold(auth, 'wait', () => {
      revoked = true;
      stop.abort();
    });
    // The client left: the wait ends with it (a response's close before its end is a connection gone).
    const left = () => stop.abort();
    reply.raw.once('close', left);
    try {
      const { httpStatus, deployment } = await create(auth);
      const row = await deps.prisma.deployment.findUnique({ where: { id: deployment.id } });
      if (!row) return reply.status(httpStatus).send({ ...deployment, final: isFinal(deployment.status) });
      const now = await waitUntilFinal(deps.prisma, row, wait * 1000, deps.changes, stop.signal);
      if (revoked) throw new AppError('UNAUTHORIZED', 'the token was revoked while waiting; the deployment goes on');
      const final = isFinal(now.status);
      return reply.status(final ? 200 : 202).send({ ...presentDeployment(now), final });
    } finally {
      deps.held.release(held);
      reply.raw.off('close', left);
    }
  }

  app.get(
    '/services/:id/deployments',
    {
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
      schema: { tags: ['deployments'], summary: 'Read a deployment', security, params: IdParams, response: { 200: DeploymentSchema, ...authErrors(404) } },
    },
    async (request) => getDeployment(deps, authOf(request), request.params.id),
  );
};
