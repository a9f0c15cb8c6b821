// Every error the API answers with is defined here, once: a stable code, its
// HTTP status and a default message. Domain code throws `AppError`s made from
// this catalog; the error handler in lib/error-handler.ts maps them to
// `{ "error": { "code", "message" } }`. docs/api.md lists every code.

export const ERROR_CATALOG = {
  VALIDATION_FAILED: { status: 400, message: 'the request is invalid' },
  INVALID_URL: { status: 400, message: 'the URL is not valid (bad percent-encoding)' },
  MALFORMED_REQUEST: { status: 400, message: 'the request is not valid HTTP/1.1' },
  INVALID_DOMAIN: { status: 400, message: 'the domain is not a valid lowercase host name' },
  UNKNOWN_NODE: { status: 400, message: 'no node has that name' },
  UNAUTHORIZED: { status: 401, message: 'a valid bearer token is required' },
  FORBIDDEN: { status: 403, message: 'this token may not do that' },
  NOT_FOUND: { status: 404, message: 'no such resource' },
  REQUEST_TIMEOUT: { status: 408, message: 'the request was not received in time' },
  CONFLICT: { status: 409, message: 'the resource already exists' },
  DOMAIN_TAKEN: { status: 409, message: 'the domain is already attached to a service' },
  NODE_DECOMMISSIONED: { status: 409, message: 'the node is decommissioned' },
  NO_NODE_AVAILABLE: { status: 409, message: 'no node is available to place the service on' },
  SERVICE_HAS_NO_PORT: { status: 409, message: 'the service has no internalPort, so no route can reach it' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'the request body is too large' },
  URI_TOO_LONG: { status: 414, message: 'a path parameter is longer than 100 characters' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'send application/json' },
  UNSUPPORTED_ENCODING: { status: 415, message: 'send the body without Content-Encoding (identity only)' },
  RATE_LIMITED: { status: 429, message: 'too many requests' },
  HEADERS_TOO_LARGE: { status: 431, message: 'the request headers are too large' },
  INTERNAL: { status: 500, message: 'internal error' },
  NODE_UNREACHABLE: { status: 503, message: 'the node is unreachable until it rejoins' },
  NOT_READY: { status: 503, message: 'the panel is not ready' },
  ACK_TIMEOUT: { status: 504, message: 'the node did not acknowledge in time' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly statusCode: number;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message?: string, details?: Record<string, unknown>) {
    super(message ?? ERROR_CATALOG[code].message);
    this.name = 'AppError';
    this.code = code;
    this.statusCode = ERROR_CATALOG[code].status;
    this.details = details;
  }
}

export const appError = (code: ErrorCode, message?: string, details?: Record<string, unknown>) =>
  new AppError(code, message, details);

/** JSON schema of the error body, for route response schemas and OpenAPI. */
export const ErrorBodySchema = {
  $id: 'ErrorBody',
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string', enum: Object.keys(ERROR_CATALOG) },
        message: { type: 'string' },
        details: { type: 'object', additionalProperties: true },
      },
    },
  },
} as const;
