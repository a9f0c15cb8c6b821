import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Nullable } from '@tether/common';
import Type from 'typebox';
import { auditOf } from './audit-context.js';
import { authOf } from './auth.js';
import { authErrors, id, IdParams, NullableTimestamp, security, Timestamp } from './schemas.js';
import type { ApiDeps } from '../domain/api-deps.js';
import { deleteVolume, listVolumes } from '../domain/volumes.js';

const VolumeSchema = Type.Object({
  id: Type.String({ description: "the panel's id of the volume (one per node and Docker volume)" }),
  nodeId: Type.String(),
  nodeName: Type.String(),
  serviceId: Type.String({ description: 'the service that owns it (it may be deleted: see kept)' }),
  serviceName: Nullable(Type.String(), { description: 'null when the panel never saw the service' }),
  teamId: Nullable(Type.String(), { description: "the service's team (kept after the service is deleted); null: operators only" }),
  name: Type.String({ description: "its name in the service's volumes" }),
  dockerName: Type.String({ description: 'the Docker volume on the node (tether-<serviceId>-<name>)' }),
  mountPath: Nullable(Type.String(), { description: "where the service mounts it; null when kept or left out of the service's volumes" }),
  readOnly: Nullable(Type.Boolean()),
  kept: Type.Boolean({ description: 'no service of its id is on its node any more (deleted with the volumes kept, or moved with leaveVolumes): DELETE /v1/volumes/:id removes it' }),
  createdAt: NullableTimestamp,
  sizeBytes: Nullable(Type.Integer({ minimum: 0 }), { description: 'bytes on disk of its data folder as the agent last measured it; null: unknown (over the measuring budget, unreadable, not measured yet)' }),
  measuredAt: Nullable(Timestamp, { description: 'when the agent last measured it (also when it went over the budget); null: not yet' }),
  reportedAt: Timestamp,
});

/** Named volumes as the nodes report them: customers see their team's, operators every one. */
export const volumeRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  app.get(
    '/volumes',
    {
      schema: {
        tags: ['volumes'],
        summary: "List named volumes on the nodes (customers: their team's), kept ones included",
        security,
        querystring: Type.Object(
          {
            nodeId: Type.Optional(id('only this node')),
            serviceId: Type.Optional(id('only this service')),
            kept: Type.Optional(Type.Boolean({ description: 'only kept volumes (true) or only mounted ones (false)' })),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Array(VolumeSchema), ...authErrors() },
      },
    },
    async (request) => listVolumes(deps, authOf(request), request.query),
  );

  app.delete(
    '/volumes/:id',
    {
      schema: {
        tags: ['volumes'],
        summary: "Delete a kept volume (and its data) on its node, through the node's live session",
        security,
        params: IdParams,
        response: { 202: VolumeSchema, ...authErrors(404, 409, 503) },
      },
    },
    async (request, reply) => reply.status(202).send(await deleteVolume(deps, authOf(request), request.params.id, auditOf(request))),
  );
};
