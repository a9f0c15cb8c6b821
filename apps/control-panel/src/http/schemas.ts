import { Nullable } from '@tether/common';
import Type, { type TSchema } from 'typebox';
import { MAX_NODE_LABELS } from '../domain/nodes.js';

// Building blocks shared by the /v1 route schemas. Every object schema is
// closed (additionalProperties: false) so a misspelt field is a 400, not a
// silently ignored value.

/** Ids are cuids; the bound keeps junk out of queries and logs. */
/** What every resource id looks like (unanchored, for patterns that contain one). */
export const ID_PATTERN = '[A-Za-z0-9_-]{1,64}';
export const id = (description = 'resource id') => Type.String({ pattern: `^${ID_PATTERN}$`, description });

export const IdParams = Type.Object({ id: id() }, { additionalProperties: false });

/** A DNS label (RFC 1123): service, node and team names. */
export const labelName = (description?: string) =>
  Type.String({
    pattern: '^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$',
    description: `lowercase RFC 1123 label: 1-63 characters of a-z, 0-9 and "-", not starting or ending with "-"${description ? `; ${description}` : ''}`,
  });

/** A free-text label for tokens. */
export const TokenName = Type.String({ minLength: 1, maxLength: 100, pattern: '^[^\\u0000-\\u001f\\u007f]*$' });

export const Timestamp = Type.String({ format: 'date-time' });
export const NullableTimestamp = Nullable(Timestamp);

export const ErrorBody = Type.Unsafe<{ error: { code: string; message: string } }>({ $ref: 'ErrorBody#' });

const ERROR_DESCRIPTIONS = {
  400: 'VALIDATION_FAILED or another 400 code (see docs/api.md)',
  401: 'UNAUTHORIZED: no token, or an unknown or revoked one',
  403: 'FORBIDDEN: a customer token on an operator endpoint',
  404: 'NOT_FOUND: no such resource, or it belongs to another team',
  409: 'a conflict (see docs/api.md for the codes)',
  413: 'PAYLOAD_TOO_LARGE: a body over 1 MiB',
  414: 'URI_TOO_LONG: a path parameter over 100 characters',
  415: 'UNSUPPORTED_MEDIA_TYPE (not application/json) or UNSUPPORTED_ENCODING (a Content-Encoding other than identity)',
  429: 'LOG_STREAMS_EXHAUSTED: the node serves its most log streams at once',
  431: 'HEADERS_TOO_LARGE: request headers over 16 KiB',
  501: "LOGS_NOT_SUPPORTED: the node's agent does not stream logs",
  503: 'NODE_UNREACHABLE',
  504: 'ACK_TIMEOUT',
} as const;

type ErrorStatus = keyof typeof ERROR_DESCRIPTIONS;

/** Response schemas for the error answers a route can give. */
export function errorResponses<S extends ErrorStatus>(...statuses: S[]): Record<S, TSchema> {
  const entries = statuses.map((s) => [s, Type.Unsafe({ $ref: 'ErrorBody#', description: ERROR_DESCRIPTIONS[s] })] as const);
  return Object.fromEntries(entries) as unknown as Record<S, TSchema>;
}

/** The error answers of any authenticated route: 400, 401, plus those given. */
export const authErrors = <S extends ErrorStatus = never>(...extra: S[]) => errorResponses<400 | 401 | S>(400, 401, ...extra);

export const security = [{ bearerAuth: [] }];

export const NoContent = Type.Unsafe<undefined>({ type: 'null', description: 'no content' });

// Node labels, and the labels a service's placement requires: Kubernetes' syntax, so labels copied from a
// cluster or a Nomad node's meta mostly fit. A key is an optional DNS-subdomain prefix and "/", then a name of
// 1-63 letters, digits, "-", "_" and "." that starts and ends with a letter or digit; a value is empty or such a name.
const LABEL_NAME = '[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?';
const LABEL_KEY = `^(?:[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?(?:\\.[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)*/)?${LABEL_NAME}$`;
const labelValue = Type.String({ pattern: `^(?:${LABEL_NAME})?$`, maxLength: 63 });
// Checked through propertyNames: a Record's key schema does not carry its pattern into the JSON Schema.
const labelKeys = { propertyNames: { type: 'string', pattern: LABEL_KEY, maxLength: 317 } };
const LABELS_DESCRIPTION =
  `at most ${MAX_NODE_LABELS}; a key is an optional DNS-subdomain prefix and "/" then a name, a name and a value 1-63 ` +
  'letters, digits, "-", "_" and "." starting and ending with a letter or digit (a value may be empty)';

/** A set of labels (a node's, or those a placement requires). */
export const NodeLabels = (description = LABELS_DESCRIPTION) => Type.Record(Type.String(), labelValue, { ...labelKeys, maxProperties: MAX_NODE_LABELS, description });

/** Label changes: a string sets a label, null removes it. */
export const NodeLabelsPatch = () =>
  Type.Record(Type.String(), Type.Union([labelValue, Type.Null()]), { ...labelKeys, maxProperties: MAX_NODE_LABELS, description: `${LABELS_DESCRIPTION}; null removes a label` });
