import type { FastifyError, FastifyInstance } from 'fastify';
import { AppError, ERROR_CATALOG, type ErrorCode } from '../errors.js';

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
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    const match = (Object.keys(ERROR_CATALOG) as ErrorCode[]).find((c) => ERROR_CATALOG[c].status === error.statusCode);
    return new AppError(match ?? 'VALIDATION_FAILED', error.message);
  }
  return new AppError('INTERNAL');
}

/** The one place errors become HTTP answers. */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | AppError, request, reply) => {
    const appErr = error instanceof AppError ? error : fromFastify(error as FastifyError);
    if (appErr.statusCode >= 500 && !(error instanceof AppError)) request.log.error({ err: error }, 'unhandled error');
    const body: { error: { code: string; message: string; details?: Record<string, unknown> } } = {
      error: { code: appErr.code, message: appErr.message },
    };
    if (appErr.details) body.error.details = appErr.details;
    return reply.status(appErr.statusCode).send(body);
  });
  app.setNotFoundHandler((request, reply) =>
    reply.status(404).send({ error: { code: 'NOT_FOUND', message: `no route ${request.method} ${request.url.split('?')[0]}` } }),
  );
}
