import { readFileSync } from 'node:fs';
import { Compile } from 'typebox/compile';

// The first release's wire (protocol version 1, commit a4fea2f), frozen so a
// test can play a peer of that release without git history: its message
// schemas as the JSON Schema they compiled to, its example frames, and its
// decode rules (fixtures/protocol-v1/README.md says how they were made).
// Nothing here may be edited to follow the current protocol: that is the point.

export const V1_PROTOCOL_VERSION = 1;
/** v1's close code for a refused version, an invalid first frame or a run of invalid frames. */
export const V1_PROTOCOL_ERROR_CLOSE = 4004;
const V1_MAX_FRAME_BYTES = 1024 * 1024;
export const V1_MAX_STATE_FRAME_BYTES = 16 * 1024 * 1024;

type JsonSchema = Record<string, unknown>;
type V1Validator = { Check(value: unknown): boolean; Errors(value: unknown): Iterable<{ instancePath: string; message: string; keyword: string }> };

const fixture = (name: string): unknown => JSON.parse(readFileSync(new URL(`../fixtures/protocol-v1/${name}`, import.meta.url), 'utf8'));

/** v1's `MESSAGE_SCHEMAS` as JSON Schema, by message type. */
export const V1_SCHEMAS = fixture('messages.schema.json') as Record<string, JsonSchema>;
/** v1's `EXAMPLE_MESSAGES`: one frame of every v1 message, as a v1 end sent it. */
export const V1_EXAMPLES = fixture('examples.json') as Record<string, V1Frame>;
export const V1_MESSAGE_TYPES: readonly string[] = Object.keys(V1_SCHEMAS);

/**
 * The same schemas with every object closed (`additionalProperties: false`):
 * what a peer accepts that knows v1's fields and nothing else. v1 itself
 * ignored unknown fields; a frame that passes this carries nothing v1 lacks.
 */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(schema)) out[key] = closed(value);
  if (out.type === 'object' && out.properties && out.additionalProperties === undefined && out.patternProperties === undefined) out.additionalProperties = false;
  return out;
}

const compile = (schemas: Record<string, JsonSchema>) =>
  new Map(Object.entries(schemas).map(([type, schema]) => [type, Compile(schema as never) as unknown as V1Validator]));
const open = compile(V1_SCHEMAS);
const strict = compile(closed(V1_SCHEMAS) as Record<string, JsonSchema>);

export type V1Frame = Record<string, unknown> & { type: string; id: string };
export type V1Decoded =
  | { ok: true; message: V1Frame }
  | { ok: false; code: string; message: string; ref: string | null };

export interface V1DecodeOptions {
  /** Refuse fields v1 did not have (see `closed`); v1 itself accepted them. */
  closedWorld?: boolean;
  /** v1 agents took routing.map and workloads up to 16 MiB. */
  maxBytes?: number;
}

/** v1's `decode`: size, JSON object, known type, schema, and a `hello` of exactly version 1. */
export function decodeV1(raw: string | Buffer, options: V1DecodeOptions = {}): V1Decoded {
  const text = typeof raw === 'string' ? raw : raw.toString('utf8');
  const size = Buffer.byteLength(text, 'utf8');
  if (size > (options.maxBytes ?? V1_MAX_FRAME_BYTES)) return { ok: false, code: 'FRAME_TOO_LARGE', message: `frame of ${size} bytes`, ref: null };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, code: 'INVALID_JSON', message: (err as Error).message, ref: null };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { ok: false, code: 'NOT_AN_OBJECT', message: 'not an object', ref: null };
  const record = value as Record<string, unknown>;
  const ref = typeof record.id === 'string' && record.id.length > 0 && record.id.length <= 128 ? record.id : null;
  if (record.type === undefined) return { ok: false, code: 'MISSING_TYPE', message: 'no type', ref };
  const validator = typeof record.type === 'string' ? (options.closedWorld ? strict : open).get(record.type) : undefined;
  if (!validator) return { ok: false, code: 'UNKNOWN_TYPE', message: `unknown message type ${JSON.stringify(record.type)}`, ref };
  if (!validator.Check(record)) {
    const first = [...validator.Errors(record)][0];
    const code = first?.keyword === 'required' ? 'MISSING_FIELD' : 'INVALID_FIELD';
    return { ok: false, code, message: `${record.type}: ${first?.instancePath || '/'} ${first?.message ?? ''}`, ref };
  }
  if (record.type === 'hello' && record.protocolVersion !== V1_PROTOCOL_VERSION) {
    return { ok: false, code: 'UNSUPPORTED_PROTOCOL_VERSION', message: `protocol version ${String(record.protocolVersion)} is not supported; this end speaks 1`, ref };
  }
  return { ok: true, message: record as V1Frame };
}

/** v1's `encode`: a frame v1 would send, refused (thrown) when v1's own schema refuses it. */
export function encodeV1(message: Record<string, unknown> & { type: string }): string {
  const validator = open.get(message.type);
  if (!validator || !validator.Check(message)) throw new Error(`not a valid v1 ${message.type}`);
  return JSON.stringify(message);
}
