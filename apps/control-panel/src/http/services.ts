import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Nullable } from '@tether/common';
import Type from 'typebox';
import { auditOf } from './audit-context.js';
import { authOf } from './auth.js';
import { IMAGE_REFERENCE_PATTERN, MAX_IMAGE_LENGTH } from '../domain/image-reference.js';
import { authErrors, id, IdParams, labelName, NodeLabels, NoContent, security, Timestamp } from './schemas.js';
import type { ApiDeps } from '../domain/api-deps.js';
import { ServiceFieldsIn, ServiceFieldsOut } from './service-field-schemas.js';
import { createService, deleteService, getService, listServices, updateService } from '../domain/services.js';

export const MAX_ENV_VARS = 100;
export const MAX_ENV_VALUE_LENGTH = 32_768;

const Image = Type.String({
  minLength: 1,
  maxLength: MAX_IMAGE_LENGTH,
  pattern: IMAGE_REFERENCE_PATTERN,
  description: 'Docker image reference, e.g. nginx:1.27 or registry.example.com:5000/team/app@sha256:…',
});
const EnvName = Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]{0,255}$' });
// NUL cannot be passed to a container's environment; everything else (newlines in keys' values, say a PEM) can.
const EnvValue = Type.String({ maxLength: MAX_ENV_VALUE_LENGTH, pattern: '^[^\\u0000]*$' });
const Env = Type.Record(
  EnvName,
  EnvValue,
  {
    maxProperties: MAX_ENV_VARS,
    additionalProperties: false,
    description: `environment variables (a PATCH replaces all of them): names match ^[A-Za-z_][A-Za-z0-9_]*$ (at most 256 characters), values are strings; at most ${MAX_ENV_VARS}`,
  },
);
// Secrets are environment variables too: the same rules.
const NewSecrets = Type.Record(EnvName, EnvValue, {
  maxProperties: MAX_ENV_VARS,
  additionalProperties: false,
  description: 'secrets, write-only: stored encrypted, given to the container as environment variables, never shown again; names as in env and not in env',
});
const SecretsPatch = Type.Record(EnvName, Nullable(EnvValue), {
  maxProperties: MAX_ENV_VARS,
  additionalProperties: false,
  description: 'secrets to set (a value: a new version) or remove (null); the others stay',
});
const SecretsInfo = Type.Array(Type.Object({ name: Type.String(), version: Type.Integer(), setAt: Timestamp }), {
  description: 'the current secrets: names and versions, never values',
});
const InternalPort = Nullable(Type.Integer({ minimum: 1, maximum: 65_535 }), {
  description: 'port the container listens on (routes point at it); null for none',
});
/** As many as the scheduler places (scheduling/schedule.ts MAX_REPLICAS) and the protocol carries (workload.replicas). */
const Replicas = Type.Integer({ minimum: 0, maximum: 100 });

const PlacementIn = Type.Object(
  {
    nodes: Type.Optional(Type.Array(labelName(), { minItems: 1, maxItems: 100, uniqueItems: true, description: 'names of the nodes it may run on; absent: any' })),
    labels: Type.Optional(NodeLabels('labels a node must carry, each with this value (node labels: POST and PATCH /v1/nodes)')),
  },
  { additionalProperties: false, description: 'where the service may run; replaced whole by PATCH (a field left out is empty). `node` is shorthand for `nodes: [node]`' },
);
const PlacementOut = Type.Object({ nodes: Type.Array(Type.String()), labels: Type.Record(Type.String(), Type.String()) });

const ServiceSchema = Type.Object({
  id: Type.String(),
  teamId: Type.String(),
  name: Type.String(),
  image: Type.String(),
  env: Type.Record(Type.String(), Type.String()),
  internalPort: Nullable(Type.Integer()),
  replicas: Type.Integer(),
  secrets: SecretsInfo,
  ...ServiceFieldsOut,
  placement: PlacementOut,
  nodeId: Nullable(Type.String({ description: 'its home node; null while no node was eligible for it (its replicas pending: see pending)' })),
  nodeName: Nullable(Type.String()),
  pending: Nullable(
    Type.Object(
      {
        count: Type.Integer({ description: 'replicas the scheduler could not place' }),
        code: Type.String({ description: 'NO_NODE_AVAILABLE (no eligible node: none registered, live or taking new work) or NO_NODE_MATCHES_LABELS' }),
        message: Type.String(),
      },
      { description: 'replicas waiting for an eligible node, as the scheduler last found (null: none waits); they are placed with no further request once a node is eligible' },
    ),
  ),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const CreateBody = Type.Object(
  {
    name: labelName('unique within the team'),
    image: Image,
    env: Type.Optional(Env),
    secrets: Type.Optional(NewSecrets),
    internalPort: Type.Optional(InternalPort),
    replicas: Type.Optional(Replicas),
    ...ServiceFieldsIn,
    node: Type.Optional(labelName('the node to run on (shorthand for placement.nodes: [node]); when omitted, the eligible node with the fewest services')),
    placement: Type.Optional(PlacementIn),
    teamId: Type.Optional(id('the owning team: required for operators, implied for customers')),
  },
  { additionalProperties: false },
);

const UpdateBody = Type.Object(
  {
    name: Type.Optional(labelName('unique within the team')),
    image: Type.Optional(Image),
    env: Type.Optional(Env),
    secrets: Type.Optional(SecretsPatch),
    internalPort: Type.Optional(InternalPort),
    replicas: Type.Optional(Replicas),
    ...ServiceFieldsIn,
    node: Type.Optional(labelName('move the service to this node (placement.nodes becomes [node]; its labels stay)')),
    placement: Type.Optional(PlacementIn),
    leaveVolumes: Type.Optional(Type.Boolean({ description: 'with node: move a service that has volumes, leaving them (and their data) on the old node; without it such a move is 409 SERVICE_HAS_VOLUMES' })),
  },
  { additionalProperties: false, minProperties: 1 },
);

/** Services: customers manage their team's, operators everyone's. */
export const serviceRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  app.post(
    '/services',
    {
      schema: {
        tags: ['services'],
        summary: 'Create a service',
        security,
        body: CreateBody,
        response: { 201: ServiceSchema, ...authErrors(404, 409) },
      },
    },
    async (request, reply) => reply.status(201).send(await createService(deps, authOf(request), request.body, auditOf(request))),
  );

  app.get(
    '/services',
    {
      schema: {
        tags: ['services'],
        summary: "List services (customers: their team's)",
        security,
        querystring: Type.Object({ teamId: Type.Optional(id('only this team (operators)')) }, { additionalProperties: false }),
        response: { 200: Type.Array(ServiceSchema), ...authErrors() },
      },
    },
    async (request) => listServices(deps, authOf(request), request.query),
  );

  app.get(
    '/services/:id',
    {
      schema: { tags: ['services'], summary: 'Read a service', security, params: IdParams, response: { 200: ServiceSchema, ...authErrors(404) } },
    },
    async (request) => getService(deps, authOf(request), request.params.id),
  );

  app.patch(
    '/services/:id',
    {
      schema: {
        tags: ['services'],
        summary: 'Change a service (only the fields given); deploy to apply it',
        security,
        params: IdParams,
        body: UpdateBody,
        response: { 200: ServiceSchema, ...authErrors(404, 409) },
      },
    },
    async (request) => updateService(deps, authOf(request), request.params.id, request.body, auditOf(request)),
  );

  app.delete(
    '/services/:id',
    {
      schema: {
        tags: ['services'],
        summary: 'Delete a service with its routes and deployments; its volumes stay on the node unless ?deleteVolumes=true',
        security,
        params: IdParams,
        querystring: Type.Object(
          {
            deleteVolumes: Type.Optional(
              Type.Boolean({ description: "also remove the service's named volumes (and their data) on its node; the node must have a live session on this panel (else 503 NODE_UNREACHABLE and nothing is deleted)" }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 204: NoContent, ...authErrors(404, 409, 503) },
      },
    },
    async (request, reply) => {
      await deleteService(deps, authOf(request), request.params.id, { deleteVolumes: request.query.deleteVolumes === true, audit: auditOf(request) });
      return reply.status(204).send();
    },
  );
};
