import { CodedError, defineErrorCatalog, mergeErrorCatalogs } from '@tether/common';

// Every error code of the panel is defined here, once. ERROR_CATALOG: what
// the API answers, with the HTTP status and a default message; domain code
// throws `AppError`s made from it, and http/error-handler.ts (with
// http/edges.ts for what never reaches a route) maps them to
// `{ "error": { "code", "message" } }`. docs/api.md lists every code.
// PANEL_ERROR_CATALOG: failures inside the panel that are not answers
// themselves (docs/operations.md lists them). Both build on common's
// CodedError (`code`, `message`, `cause`).

export const ERROR_CATALOG = defineErrorCatalog({
  VALIDATION_FAILED: { status: 400, message: 'the request is invalid' },
  INVALID_URL: { status: 400, message: 'the URL is not valid (bad percent-encoding)' },
  MALFORMED_REQUEST: { status: 400, message: 'the request is not valid HTTP/1.1' },
  INVALID_DOMAIN: { status: 400, message: 'the domain is not a valid lowercase host name' },
  SECRET_NAME_IN_ENV: { status: 400, message: 'a name is both an environment variable and a secret of the service' },
  INVALID_REGISTRY_HOST: { status: 400, message: 'the registry host is not a DNS name or IPv4 address with an optional :port' },
  RESERVED_DOMAIN: { status: 400, message: "the domain is reserved for Tether's own use (tether.internal and names under it)" },
  UNKNOWN_NODE: { status: 400, message: 'no node has that name' },
  UPGRADE_NOT_ALLOWED: { status: 400, message: 'only GET /v1/agent/connect accepts a WebSocket upgrade' },
  ROUTE_SHAPE_UNSUPPORTED: { status: 400, message: 'the route is outside the shape the proxy serves without a config change' },
  INVALID_VOLUME: { status: 400, message: 'a volume is a named volume the service owns: a label name, an absolute mountPath without "..", at most 10' },
  VOLUME_NEEDS_ONE_REPLICA: { status: 400, message: 'a service with a writable volume runs 0 or 1 replicas' },
  NO_ROLLBACK_TARGET: { status: 409, message: 'no deployment of the service before its latest one ever reached running' },
  ROLLBACK_TARGET_NEVER_RAN: { status: 409, message: 'the named deployment never reached running' },
  CONFIRMATION_REQUIRED: { status: 400, message: 'this action cannot be undone: send {"confirm": true} to carry it out' },
  HEALTHCHECK_NEEDS_PORT: { status: 400, message: 'a health check needs a port: the service\'s internalPort or healthCheck.port' },
  UNAUTHORIZED: { status: 401, message: 'a valid bearer token is required' },
  FORBIDDEN: { status: 403, message: 'this token may not do that' },
  AGENT_DECOMMISSIONED: { status: 403, message: 'the node is decommissioned (or declared lost): its agent is refused, and stops every container it runs for Tether' },
  NOT_FOUND: { status: 404, message: 'no such resource' },
  CLI_UNAVAILABLE: { status: 404, message: 'this panel does not carry the tether CLI' },
  REQUEST_TIMEOUT: { status: 408, message: 'the request was not received in time' },
  CONFLICT: { status: 409, message: 'the resource already exists' },
  DOMAIN_TAKEN: { status: 409, message: 'the domain is already attached to a service' },
  NODE_DECOMMISSIONED: { status: 409, message: 'the node is decommissioned' },
  NODE_CORDONED: { status: 409, message: 'the node is cordoned: nothing new is placed on it' },
  NO_NODE_AVAILABLE: { status: 409, message: 'no node is available to place the service on' },
  NO_NODE_MATCHES_LABELS: { status: 409, message: "no node that takes new services carries the placement's labels" },
  SERVICE_PENDING: { status: 409, message: 'the service has no node yet: its replicas wait for an eligible node (see its pending)' },
  STORED_SECRET_UNREADABLE: {
    status: 409,
    message: 'a secret or registry password the deployment needs does not decrypt (its row was changed outside Tether, or its key is not given); set it again and deploy',
  },
  SECRETS_NOT_CONFIGURED: { status: 409, message: 'the panel has no secrets key (TETHER_SECRETS_KEY or TETHER_SECRETS_KEY_FILE), so it stores no secret' },
  AGENT_LACKS_CAPABILITY: { status: 409, message: "the node's agent does not announce a capability this deployment needs (an older release)" },
  SERVICE_HAS_NO_PORT: { status: 409, message: 'the service has no internalPort, so no route can reach it' },
  VOLUME_IN_USE: { status: 409, message: 'the volume belongs to a service on its node; delete the service with ?deleteVolumes=true, or move it away first' },
  SERVICE_HAS_VOLUMES: { status: 409, message: 'the service has volumes on its node; moving it needs "leaveVolumes": true' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'the request body is too large' },
  URI_TOO_LONG: { status: 414, message: 'a path parameter is longer than 100 characters' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'send application/json' },
  UNSUPPORTED_ENCODING: { status: 415, message: 'send the body without Content-Encoding (identity only)' },
  RATE_LIMITED: { status: 429, message: 'too many requests' },
  TOO_MANY_CONNECTIONS: { status: 429, message: 'this address holds the most connections the panel allows one address; close one and retry' },
  STREAMS_EXHAUSTED: { status: 429, message: 'this token or its team holds the most waits and event streams allowed at once; end one first' },
  LOG_STREAMS_EXHAUSTED: { status: 429, message: "the node serves its most log streams at once; try again when one ends" },
  HEADERS_TOO_LARGE: { status: 431, message: 'the request headers are too large' },
  INTERNAL: { status: 500, message: 'internal error' },
  LOGS_NOT_SUPPORTED: { status: 501, message: "the node's agent does not stream logs (an older release)" },
  NODE_UNREACHABLE: { status: 503, message: 'the node is unreachable until it rejoins' },
  NOT_READY: { status: 503, message: 'the panel is not ready' },
  PANEL_LEASE_LOST: { status: 503, message: 'this panel does not hold its lease on the database; use another panel' },
  OWNER_PANEL_UNREACHABLE: { status: 503, message: "the panel holding the node's session did not answer at its internal URL; retry" },
  OWNER_PANEL_NO_INTERNAL_URL: { status: 503, message: "the panel holding the node's session has no internal URL; ask that panel" },
  DATABASE_UNAVAILABLE: { status: 503, message: 'the database is unavailable; retry later' },
  DATABASE_NOT_PRIMARY: { status: 503, message: 'the database server reached does not accept writes (a failover is under way); retry later' },
  ACK_TIMEOUT: { status: 504, message: 'the node did not acknowledge in time' },
} as const satisfies Record<string, { status: number; message: string }>);

export type ErrorCode = keyof typeof ERROR_CATALOG;

/** Seconds a client is told to wait (Retry-After) when the database is unavailable or the panel not ready. */
export const RETRY_AFTER_SECONDS = 5;

/** An answer of the API: a catalogued code, its HTTP status, a message for people, optional details. */
export class AppError extends CodedError<ErrorCode> {
  readonly statusCode: number;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message?: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(code, message ?? ERROR_CATALOG[code].message, options);
    this.statusCode = ERROR_CATALOG[code].status;
    this.details = details;
  }
}

export const PANEL_ERROR_CATALOG = defineErrorCatalog({
  /** SessionClosedError: the session ended before a message was ACKed (dispatch answers NODE_UNREACHABLE). */
  SESSION_CLOSED: 'the agent session closed before the message was acknowledged',
  /** AckTimeoutError: no ACK within the ACK timeout; the session is killed (dispatch answers ACK_TIMEOUT, the API's code). */
  SESSION_ACK_TIMEOUT: 'the agent did not acknowledge a message within the ACK timeout',
  /** MigrationError: the panel does not start. */
  MIGRATION_FAILED: 'a SQL migration failed, or an earlier failed one is not resolved',
  /** The panel does not start. */
  ADMIN_TOKEN_CONFLICT: 'TETHER_ADMIN_TOKEN is already in use as a customer token',
  /** The panel does not start: a secrets key is malformed, or both the key and the key file are set. */
  SECRETS_KEY_INVALID: 'TETHER_SECRETS_KEY or TETHER_SECRETS_KEY_FILE does not hold valid keys',
  /** The panel does not start (exit 2): the database holds secrets under a key it was not given. */
  SECRETS_KEY_MISSING: 'the database holds secrets encrypted under a key this panel was not given',
  /** A stored secret does not authenticate under its key (tampered or truncated); the deploy fails. */
  SECRET_UNREADABLE: 'a stored secret does not decrypt',
  /** StaleEpochError: a scheduler write under an epoch that is no longer the lease's; nothing was written. */
  SCHEDULER_EPOCH_STALE: 'this panel no longer holds the scheduler lease under the epoch it wrote with',
  /** certificates.report (certificates.share): a node reported a certificate of a domain another node issues; refused (an error frame), not stored. */
  CERTIFICATE_NOT_ISSUER: 'the reporting node is not the issuer of the domain it reported a certificate for',
  /** certificates.report: the chain does not name the domain, the key is not its leaf's, or it has expired; refused, not stored. */
  CERTIFICATE_INVALID: 'the reported certificate does not name its domain, does not match its key, or has expired',
  /** certificates.report on a panel without a secrets key (then it does not confirm certificates.share): refused. */
  CERTIFICATES_NOT_SHARED: 'this panel has no secrets key, so it cannot store or share certificate keys',
  /** ConfigError (common): the panel does not start; every bad variable is named. */
  INVALID_CONFIG: 'an environment variable is missing or invalid',
});

export type PanelErrorCode = keyof typeof PANEL_ERROR_CATALOG;

/** A failure inside the panel, with a code from PANEL_ERROR_CATALOG. */
export class PanelError<C extends PanelErrorCode = PanelErrorCode> extends CodedError<C> {}

/** Every code the panel uses; importing this module fails if one were defined twice. */
export const PANEL_CODES = mergeErrorCatalogs(ERROR_CATALOG, PANEL_ERROR_CATALOG);

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
