import type { FastifyInstance, FastifyRequest } from 'fastify';
import Type from 'typebox';
import { unstorableField } from '../db/stored-text.js';
import { AppError } from '../errors.js';

// Guards every route gets where its schema is applied, so an endpoint added
// later has them without a line of its own.
//
// Stored text: PostgreSQL refuses NUL in text (SQLSTATE 22021) and in jsonb
// (22P05). A NUL in any string of the body, the query or the path parameters
// is refused as 400 VALIDATION_FAILED naming the field, before a handler could
// hand it to the database (where it answered 500). Unpaired surrogates in
// bodies are refused by the JSON parser (edges.ts); query strings and paths are
// checked for them here too.
//
// Optional bodies: a route whose body schema is `Type.Optional(...)` takes no
// body (no content type, or `application/json` with zero bytes) as `{}`, as
// `curl -X POST` sends it.

/** True when a route's body schema was declared `Type.Optional(...)`: the body may be left out. */
export function isOptionalBody(body: unknown): boolean {
  return body !== null && typeof body === 'object' && Type.IsOptional(body as Parameters<typeof Type.IsOptional>[0]);
}

/** Throws VALIDATION_FAILED naming the first field of params, query or body that cannot be stored. */
export function refuseUnstorableText(request: Pick<FastifyRequest, 'params' | 'query' | 'body'>): void {
  const field =
    unstorableField(request.params, 'params') ?? unstorableField(request.query, 'querystring') ?? unstorableField(request.body, 'body');
  if (field) throw new AppError('VALIDATION_FAILED', `${field} contains a NUL byte or an unpaired surrogate, which cannot be stored`, { field });
}

export function installRequestGuards(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => refuseUnstorableText(request));
  app.addHook('onRoute', (route) => {
    if (!isOptionalBody(route.schema?.body)) return;
    const own = route.preValidation;
    const defaultBody = async (request: FastifyRequest) => {
      if (request.body === undefined || request.body === null) request.body = {};
    };
    route.preValidation = own ? [defaultBody, ...(Array.isArray(own) ? own : [own])] : defaultBody;
  });
}
