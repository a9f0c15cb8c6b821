import { isUtf8 } from 'node:buffer';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyHttpOptions, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import { firstBadString } from '../db/stored-text.js';
import { AppError, ERROR_CATALOG, type ErrorCode } from '../errors.js';
import type { ConnectionCap } from './connection-cap.js';

// What reaches the panel before (or instead of) a route: HTTP that Node's
// parser refuses, URLs the router cannot decode or match, bodies we cannot
// read as JSON. Each answer has the API's error shape and a catalogued code,
// and none echoes the request back (a 10 KB path or a header value would
// otherwise come back in the body or the logs).

/** Fastify's default; longer path parameters answer 414 URI_TOO_LONG. */
export const MAX_PARAM_LENGTH = 100;

export function errorBody(code: ErrorCode, message: string = ERROR_CATALOG[code].message): string {
  return JSON.stringify({ error: { code, message } });
}

/**
 * Node's HTTP parser refused the request (unknown method, both Content-Length
 * and Transfer-Encoding, a control character in a header, a bad chunk size,
 * headers over the limit) or it timed out: answer on the raw socket and close.
 */
function clientErrorHandler(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const code: ErrorCode =
    err.code === 'HPE_HEADER_OVERFLOW' ? 'HEADERS_TOO_LARGE' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'REQUEST_TIMEOUT' : 'MALFORMED_REQUEST';
  this.log.debug({ err: { code: err.code, message: err.message } }, 'malformed request refused');
  writeRawError(socket, code);
  socket.destroy();
}

/** An answer in the API's shape written straight to a socket no HTTP response owns (a refused request or upgrade). */
export function writeRawError(socket: Duplex, code: ErrorCode, headers: Record<string, string> = {}): void {
  if (!socket.writable) return;
  const status = ERROR_CATALOG[code].status;
  const body = errorBody(code);
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.write(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`,
  );
}

/** The router could not decode the path (`%zz`) or a parameter is too long. */
function frameworkErrors(error: { code: string }, _request: FastifyRequest, reply: FastifyReply): void {
  const code: ErrorCode = error.code === 'FST_ERR_BAD_URL' ? 'INVALID_URL' : error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'URI_TOO_LONG' : 'INTERNAL';
  void reply.status(ERROR_CATALOG[code].status).type('application/json; charset=utf-8').send(errorBody(code));
}

/** Server options that route these answers through the catalog. */
export const edgeServerOptions = {
  clientErrorHandler,
  frameworkErrors,
  // Fastify's own 503 while closing has its own body; panel-http.ts answers NOT_READY in the API's shape instead.
  return503OnClosing: false,
  routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
} satisfies Partial<FastifyServerOptions>;

/** Matches an unpaired surrogate: with the `u` flag a valid pair is one code point, not two surrogates. */
const LONE_SURROGATE = /\p{Surrogate}/u;

/**
 * Where a body holds a string (or key) that is not well-formed Unicode: an
 * unpaired UTF-16 surrogate from a `\ud800`-style escape. PostgreSQL cannot
 * store one, and replacing it would store something the caller did not send.
 */
export function illFormedField(value: unknown, bad: (s: string) => boolean = (s) => LONE_SURROGATE.test(s)): string | null {
  return firstBadString(value, 'body', bad);
}

/**
 * JSON bodies: read as bytes, refused unless they are UTF-8 and every string
 * in them is well-formed Unicode, so nothing is stored altered (U+FFFD) and
 * PostgreSQL never sees what it would reject (a 500). Parsing is Fastify's own
 * (prototype poisoning refused, and its errors name no part of the body).
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    // Zero bytes are no body (what `curl -X POST -H 'content-type: application/json'` sends): the route's
    // schema decides, so an optional body is `{}` (request-guards.ts) and a required one fails validation.
    if (body.length === 0) return done(null, undefined);
    const text = body.toString('utf8');
    parse(request, text, (err: Error | null, parsed?: unknown) => {
      if (err) return done(err, undefined);
      if (!isUtf8(body)) {
        const field = illFormedField(parsed, (s) => s.includes('\ufffd')) ?? 'the body';
        return done(new AppError('VALIDATION_FAILED', `${field} is not valid UTF-8`), undefined);
      }
      const field = illFormedField(parsed);
      if (field) return done(new AppError('VALIDATION_FAILED', `${field} is not well-formed Unicode (an unpaired UTF-16 surrogate)`), undefined);
      done(null, parsed);
    });
  });
}

/** Bodies are read as sent: an encoding we would not decode is refused, not parsed as if it were plain. */
export function refuseContentEncodings(app: FastifyInstance): void {
  app.addHook('preParsing', async (request) => {
    const encoding = request.headers['content-encoding'];
    if (encoding === undefined || encoding.trim().toLowerCase() === 'identity') return;
    throw new AppError('UNSUPPORTED_ENCODING');
  });
}

/** A connection over its address's cap (http/connection-cap.ts) is answered TOO_MANY_CONNECTIONS before any other hook. */
export function refuseCappedConnections(app: FastifyInstance, cap: ConnectionCap, refused?: () => void): void {
  app.addHook('onRequest', async (request, reply) => {
    if (!cap.isRefused(request.raw.socket)) return;
    refused?.();
    void reply.header('connection', 'close');
    throw new AppError('TOO_MANY_CONNECTIONS');
  });
}

/**
 * Node's own request deadline (headers and body) with a check often enough to keep it: a body trickled a byte
 * at a time is answered 408 REQUEST_TIMEOUT by clientErrorHandler within the deadline plus one check.
 */
export function requestDeadlineOptions(bodyTimeoutMs: number) {
  return {
    requestTimeout: bodyTimeoutMs,
    http: { connectionsCheckingInterval: bodyCheckIntervalMs(bodyTimeoutMs), headersTimeout: Math.min(60_000, bodyTimeoutMs) },
  } satisfies Partial<FastifyHttpOptions<http.Server>>;
}

/** How often Node checks the request deadline: a tenth of it, between 25 ms and 1 s. */
export function bodyCheckIntervalMs(bodyTimeoutMs: number): number {
  return Math.min(1_000, Math.max(25, Math.round(bodyTimeoutMs / 10)));
}
