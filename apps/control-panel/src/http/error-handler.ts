import type { FastifyError, FastifyInstance } from 'fastify';
import { isDatabaseUnavailable, isNotPrimary, isUnstorableText } from '../db/db-faults.js';
import { AppError, ERROR_CATALOG, RETRY_AFTER_SECONDS, type ErrorCode } from '../errors.js';

/** Paths the 404 answer may repeat. */
const PLAIN_PATH = /^[A-Za-z0-9/_.-]{1,100}$/;

function fromFastify(error: FastifyError): AppError {
  if (error.validation) return new AppError('VALIDATION_FAILED', error.message);
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('PAYLOAD_TOO_LARGE');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('UNSUPPORTED_MEDIA_TYPE');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError('VALIDATION_FAILED', error.message);
  }
  // Any other client error of Fastify's: the first catalog code of its status, with the catalog's message
  // (Fastify's messages can quote the request, e.g. the Content-Type it refused).
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    const match = (Object.keys(ERROR_CATALOG) as ErrorCode[]).find((c) => ERROR_CATALOG[c].status === error.statusCode);
    return new AppError(match ?? 'VALIDATION_FAILED');
  }
  return new AppError('INTERNAL');
}

/** The one place errors become HTTP answers. */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | AppError, request, reply) => {
    // A database fault is not a bug: 503 with the catalog's message; the driver's text goes to the log only.
    const dbDown = !(error instanceof AppError) && isDatabaseUnavailable(error);
    if (dbDown) request.log.warn({ err: error }, 'database unavailable');
    const appErr =
      error instanceof AppError
        ? error
        : dbDown
          ? new AppError(isNotPrimary(error) ? 'DATABASE_NOT_PRIMARY' : 'DATABASE_UNAVAILABLE')
          : isUnstorableText(error)
            ? new AppError('VALIDATION_FAILED', 'a value contains text the database cannot store (a NUL byte or invalid encoding)')
            : fromFastify(error as FastifyError);
    if (appErr.statusCode >= 500 && !(error instanceof AppError) && !dbDown) request.log.error({ err: error }, 'unhandled error');
    if ((appErr.code === 'DATABASE_UNAVAILABLE' || appErr.code === 'DATABASE_NOT_PRIMARY' || appErr.code === 'NOT_READY') && !reply.hasHeader('retry-after')) void reply.header('retry-after', String(RETRY_AFTER_SECONDS));
    const body: { error: { code: string; message: string; details?: Record<string, unknown> } } = {
      error: { code: appErr.code, message: appErr.message },
    };
    if (appErr.details) body.error.details = appErr.details;
    return reply.status(appErr.statusCode).send(body);
  });
  // The path is named only when it is short and plain, so the answer never carries junk a caller sent.
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    const named = PLAIN_PATH.test(path) ? `${request.method} ${path}` : `${request.method} for this path`;
    return reply.status(404).send({ error: { code: 'NOT_FOUND', message: `no route ${named}` } });
  });
}
