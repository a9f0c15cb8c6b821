import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Nullable } from '@tether/common';
import Type from 'typebox';
import { auditOf } from './audit-context.js';
import { authOf } from './auth.js';
import { MAX_DOMAIN_LENGTH, MAX_PATH_PREFIX_LENGTH, PATH_PREFIX_PATTERN } from '../domain/host-names.js';
import { authErrors, id, IdParams, NoContent, security, Timestamp } from './schemas.js';
import type { ApiDeps } from '../domain/api-deps.js';
import { attachRoute, detachRoute, getRoute, listRoutes } from '../domain/routes.js';

const RouteSchema = Type.Object({
  id: Type.String(),
  domain: Type.String(),
  pathPrefix: Nullable(Type.String()),
  serviceId: Type.String(),
  createdAt: Timestamp,
});

/** The route's health as its node's agent last probed it through its own proxy (docs/api.md, "Route health"). */
export const RouteHealthSchema = Type.Object({
  state: Type.Union([Type.Literal('serving'), Type.Literal('failing'), Type.Literal('unknown')]),
  reason: Type.String(),
  evidence: Nullable(
    Type.Object({
      domain: Type.String(),
      pathPrefix: Nullable(Type.String()),
      state: Type.Union([Type.Literal('serving'), Type.Literal('failing')]),
      at: Timestamp,
      status: Nullable(Type.Integer()),
      madeBy: Type.Union([Type.Literal('app'), Type.Literal('proxy'), Type.Literal('none')]),
      error: Nullable(Type.String()),
      latencyMs: Type.Integer(),
      notProbed: Type.Optional(
        Type.Object(
          {
            reason: Type.Union([Type.Literal('dns-elsewhere'), Type.Literal('dns-error')]),
            resolved: Type.Array(Type.String()),
            hostAddresses: Type.Array(Type.String()),
          },
          { description: "TLS with the ACME issuer: not probed (no certificate requested) because the name's DNS does not point at the node" },
        ),
      ),
      sessionId: Type.String(),
    }),
  ),
});
/** The domain's certificate as the probe's TLS handshake saw it (docs/api.md, "Route health"); null until one was. */
export const RouteCertificateSchema = Nullable(
  Type.Object({
    issuer: Nullable(Type.String({ description: 'RFC 4514' })),
    notBefore: Nullable(Timestamp),
    notAfter: Nullable(Timestamp),
    serial: Nullable(Type.String({ description: 'lowercase hex, no colons' })),
    lastError: Nullable(Type.String({ description: "why no certificate is (or can be) presented: the CA's issuance error, the last probe's handshake failure, or that none is requested because DNS points elsewhere" })),
  }),
);
const ServedBySchema = Type.Object(
  {
    node: Type.Object({ id: Type.String(), name: Type.String() }),
    privateAddress: Nullable(Type.String({ description: "the node's address on the operators' private network, as its agent announced it (TETHER_PRIVATE_ADDRESS)" })),
    role: Type.Union([Type.Literal('replica'), Type.Literal('ingress'), Type.Literal('home')], {
      description: 'replica: a replica of the service runs there; ingress: an entry point (label tether.io/ingress=true); home: the node of a service placed on one node',
    }),
    health: RouteHealthSchema,
    certificate: RouteCertificateSchema,
  },
  { description: 'a node serving the route: DNS may name its address' },
);
const RouteRead = Type.Object({
  ...RouteSchema.properties,
  health: RouteHealthSchema,
  certificate: RouteCertificateSchema,
  servedBy: Type.Array(ServedBySchema, { description: 'every node serving the route, by name; the route is serving while any of them serves it' }),
});

const AttachBody = Type.Object(
  {
    // Checked in code (domain/host-names.ts) so that every bad domain answers INVALID_DOMAIN;
    // the schema only bounds the size.
    domain: Type.String({
      maxLength: 4 * MAX_DOMAIN_LENGTH,
      description: `lowercase RFC 1123 host name (at least two labels, at most ${MAX_DOMAIN_LENGTH} characters); anything else is INVALID_DOMAIN`,
    }),
    serviceId: id('the service the domain routes to'),
    pathPrefix: Type.Optional(
      Type.String({
        maxLength: MAX_PATH_PREFIX_LENGTH,
        pattern: PATH_PREFIX_PATTERN,
        description:
          'only requests under this path, matched segment-wise and without case, the longest prefix winning: "/" (the whole domain, stored as null) ' +
          'or 1 to 3 segments of a-z 0-9 _ - (1 to 62 each; a trailing "/" goes, upper case is lowercased); other paths are ROUTE_SHAPE_UNSUPPORTED',
      }),
    ),
  },
  { additionalProperties: false },
);

/** Routes: attach a domain to a service, list, detach. Customers: their team's services only. */
export const routeRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  app.post(
    '/routes',
    {
      schema: {
        tags: ['routes'],
        summary: 'Attach a domain to a service',
        security,
        body: AttachBody,
        response: { 201: RouteSchema, ...authErrors(404, 409) },
      },
    },
    async (request, reply) => reply.status(201).send(await attachRoute(deps, authOf(request), request.body, auditOf(request))),
  );

  app.get(
    '/routes',
    {
      schema: {
        tags: ['routes'],
        summary: "List routes (customers: their team's)",
        security,
        querystring: Type.Object({ serviceId: Type.Optional(id('only this service')) }, { additionalProperties: false }),
        response: { 200: Type.Array(RouteRead), ...authErrors() },
      },
    },
    async (request) => listRoutes(deps, authOf(request), request.query),
  );

  app.get(
    '/routes/:id',
    {
      schema: { tags: ['routes'], summary: 'Read a route, with its health', security, params: IdParams, response: { 200: RouteRead, ...authErrors(404) } },
    },
    async (request) => getRoute(deps, authOf(request), request.params.id),
  );

  app.delete(
    '/routes/:id',
    {
      schema: {
        tags: ['routes'],
        summary: 'Detach a domain',
        security,
        params: IdParams,
        response: { 204: NoContent, ...authErrors(404) },
      },
    },
    async (request, reply) => {
      await detachRoute(deps, authOf(request), request.params.id, auditOf(request));
      return reply.status(204).send();
    },
  );
};
