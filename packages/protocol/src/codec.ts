import { Compile, type Validator } from 'typebox/compile';
import { isIdentifier, sanitizeText } from '@tether/common';
import { MAX_FRAME_BYTES, MAX_STATE_FRAME_BYTES } from './constants.js';
import { FRAME_ERROR_CODES, InvalidMessageError, type FrameError, type FrameErrorCode } from './errors.js';
import { allocationsProblem } from './allocations.js';
import { FIELD_LIMITS, MESSAGE_SCHEMAS, type Allocations, type Message, type MessageType } from './messages.js';
import { DEFAULT_PROTOCOL_RANGE, describeRange, speaksVersion, type ProtocolRange } from './versions.js';

export type DecodeResult = { ok: true; message: Message } | { ok: false; error: FrameError };

export interface DecodeOptions {
  /** The frame arrived as a binary WebSocket frame; the protocol only speaks text. */
  binary?: boolean;
  /** Override the size limit (bytes). */
  maxBytes?: number;
  /** The `hello` versions accepted (default: MIN_PROTOCOL_VERSION to PROTOCOL_VERSION); a panel pinned lower passes its range. */
  protocolVersions?: ProtocolRange;
}

const validators = new Map<string, Validator>(
  Object.entries(MESSAGE_SCHEMAS).map(([type, schema]) => [type, Compile(schema) as unknown as Validator]),
);

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A rejection. Its message may quote the frame (a field path, a type), so it is sanitised like any free text. */
function fail(code: FrameErrorCode, message: string, ref: string | null = null): DecodeResult {
  return { ok: false, error: { code, message: sanitizeText(message, { keepNewlines: false, maxLength: FIELD_LIMITS.text }), ref } };
}

function byteLength(raw: unknown): number | undefined {
  if (typeof raw === 'string') return Buffer.byteLength(raw, 'utf8');
  if (raw instanceof Uint8Array) return raw.byteLength;
  if (raw instanceof ArrayBuffer) return raw.byteLength;
  if (Array.isArray(raw) && raw.every((part) => part instanceof Uint8Array)) {
    return raw.reduce((sum: number, part: Uint8Array) => sum + part.byteLength, 0);
  }
  return undefined;
}

function toText(raw: unknown): string | undefined {
  if (typeof raw === 'string') return raw;
  if (raw instanceof Uint8Array || raw instanceof ArrayBuffer) return utf8.decode(raw);
  if (Array.isArray(raw)) return utf8.decode(Buffer.concat(raw as Uint8Array[]));
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The frame's id when it is a valid identifier: an `error` reply names it in `ref`, never echoes junk. */
function readId(value: Record<string, unknown>): string | null {
  return isIdentifier(value.id, FIELD_LIMITS.id) ? value.id : null;
}

function validationFailure(type: string, value: Record<string, unknown>, validator: Validator, ref: string | null): DecodeResult {
  const errors = validator.Errors(value);
  const missing = errors.find((e) => e.keyword === 'required');
  if (missing) {
    const fields = (missing.params as { requiredProperties?: string[] }).requiredProperties ?? [];
    const where = missing.instancePath || '/';
    return fail(FRAME_ERROR_CODES.MISSING_FIELD, `${type}: missing field ${fields.join(', ')} at ${where}`, ref);
  }
  const first = errors[0];
  const where = first?.instancePath || '/';
  return fail(FRAME_ERROR_CODES.INVALID_FIELD, `${type}: invalid field at ${where}: ${first?.message ?? 'does not match the schema'}`, ref);
}

/**
 * Turns whatever bytes arrived into a typed message or a coded error. Never throws.
 */
export function decode(raw: unknown, options: DecodeOptions = {}): DecodeResult {
  try {
    const maxBytes = options.maxBytes ?? MAX_FRAME_BYTES;
    const size = byteLength(raw);
    if (size === undefined) return fail(FRAME_ERROR_CODES.INVALID_JSON, 'frame is neither text nor bytes');
    if (size > maxBytes) return fail(FRAME_ERROR_CODES.FRAME_TOO_LARGE, `frame of ${size} bytes exceeds the limit of ${maxBytes}`);
    if (options.binary) return fail(FRAME_ERROR_CODES.BINARY_FRAME, 'binary frames are not part of the protocol; send JSON text frames');

    let text: string | undefined;
    try {
      text = toText(raw);
    } catch {
      // Unreachable from a socket (the WebSocket layer closes with 1007 first), but decode takes bytes.
      return fail(FRAME_ERROR_CODES.INVALID_JSON, 'frame is not UTF-8 JSON text');
    }
    if (text === undefined) return fail(FRAME_ERROR_CODES.INVALID_JSON, 'frame is neither text nor bytes');

    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      return fail(FRAME_ERROR_CODES.INVALID_JSON, `frame is not JSON: ${(err as Error).message}`);
    }
    if (!isRecord(value)) return fail(FRAME_ERROR_CODES.NOT_AN_OBJECT, 'frame must be a JSON object');

    const ref = readId(value);
    const type = value.type;
    if (type === undefined) return fail(FRAME_ERROR_CODES.MISSING_TYPE, 'frame has no "type"', ref);
    if (typeof type !== 'string') return fail(FRAME_ERROR_CODES.INVALID_FIELD, '"type" must be a string', ref);
    const validator = Object.hasOwn(MESSAGE_SCHEMAS, type) ? validators.get(type) : undefined;
    if (!validator) return fail(FRAME_ERROR_CODES.UNKNOWN_TYPE, `unknown message type "${type.slice(0, 64)}"`, ref);
    if (!validator.Check(value)) return validationFailure(type, value, validator, ref);
    const versions = options.protocolVersions ?? DEFAULT_PROTOCOL_RANGE;
    if (type === 'hello' && !speaksVersion(versions, value.protocolVersion as number)) {
      return fail(
        FRAME_ERROR_CODES.UNSUPPORTED_PROTOCOL_VERSION,
        `protocol version ${String(value.protocolVersion)} is not supported; this end speaks ${describeRange(versions)}`,
        ref,
      );
    }
    const problem = type === 'allocations' ? allocationsProblem(value as unknown as Allocations) : null;
    if (problem) return fail(FRAME_ERROR_CODES.INVALID_FIELD, `allocations: invalid field at ${problem}`, ref);
    return { ok: true, message: value as Message };
  } catch (err) {
    // Defence in depth: decode's contract is to never throw, whatever arrives.
    return fail(FRAME_ERROR_CODES.INVALID_JSON, `frame could not be decoded: ${(err as Error)?.message ?? String(err)}`);
  }
}

/** Validates a message and serialises it. Throws `InvalidMessageError` on an invalid message. */
export function encode(message: Message): string {
  const validator = validators.get(message.type);
  if (!validator) throw new InvalidMessageError(FRAME_ERROR_CODES.UNKNOWN_TYPE, `unknown message type "${String(message.type)}"`);
  const value: unknown = message;
  if (!validator.Check(value)) {
    const result = validationFailure(message.type, message as unknown as Record<string, unknown>, validator, message.id ?? null);
    const error = (result as { ok: false; error: FrameError }).error;
    throw new InvalidMessageError(error.code, error.message);
  }
  const problem = message.type === 'allocations' ? allocationsProblem(message) : null;
  if (problem) throw new InvalidMessageError(FRAME_ERROR_CODES.INVALID_FIELD, `allocations: invalid field at ${problem}`);
  const text = JSON.stringify(message);
  const size = Buffer.byteLength(text, 'utf8');
  const limit = maxFrameBytes(message.type);
  if (size > limit) {
    throw new InvalidMessageError(FRAME_ERROR_CODES.FRAME_TOO_LARGE, `${message.type} of ${size} bytes exceeds the limit of ${limit}`);
  }
  return text;
}

/** The size limit of a message type: state frames (routing.map, workloads, allocations) may be larger. */
export function maxFrameBytes(type: MessageType): number {
  return STATE_FRAME_TYPES.has(type) ? MAX_STATE_FRAME_BYTES : MAX_FRAME_BYTES;
}

const STATE_FRAME_TYPES: ReadonlySet<MessageType> = new Set(['routing.map', 'workloads', 'allocations', 'certificates']);

/** Narrows a decoded message to one type. */
export function isMessage<T extends MessageType>(message: Message, type: T): message is Extract<Message, { type: T }> {
  return message.type === type;
}
