import { catalogCodes, CodedError, defineErrorCatalog } from '@tether/common';

/**
 * Stable codes for frames either end rejects. They travel in `error` messages
 * and are listed in docs/protocol.md; never renumber or reuse one.
 * (A text frame that is not UTF-8 never reaches `decode`: the WebSocket layer
 * closes with INVALID_PAYLOAD, 1007. `INVALID_UTF8` was removed for that reason.)
 */
export const FRAME_ERROR_CATALOG = defineErrorCatalog({
  FRAME_TOO_LARGE: 'more than 1 MiB; rejected before parsing',
  BINARY_FRAME: 'a binary WebSocket frame; the protocol speaks JSON text',
  INVALID_JSON: 'not JSON text',
  NOT_AN_OBJECT: 'JSON, but not an object',
  MISSING_TYPE: 'no `type` field',
  UNKNOWN_TYPE: 'a `type` this protocol does not have',
  MISSING_FIELD: 'a required field is absent (the message names it)',
  INVALID_FIELD: 'a field has the wrong type, is out of bounds, or is an identifier holding a control character',
  UNSUPPORTED_PROTOCOL_VERSION: '`hello` with a `protocolVersion` outside the versions this end accepts (too old or too new)',
  UNEXPECTED_MESSAGE: 'a valid message this end does not accept from that peer or at that moment (e.g. a second `hello`, or `deploy` sent by an agent)',
});

export const FRAME_ERROR_CODES = catalogCodes(FRAME_ERROR_CATALOG);

export type FrameErrorCode = keyof typeof FRAME_ERROR_CATALOG;

export interface FrameError {
  code: FrameErrorCode;
  message: string;
  /** The `id` of the rejected frame when it could be read, so a reply can name it in `ref`. */
  ref: string | null;
}

/** Thrown by `encode` when the caller builds an invalid message: a programming error, not input. */
export class InvalidMessageError extends CodedError<FrameErrorCode> {}
