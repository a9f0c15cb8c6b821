/**
 * Stable codes for frames either end rejects. They travel in `error` messages
 * and are listed in docs/protocol.md; never renumber or reuse one.
 */
export const FRAME_ERROR_CODES = Object.freeze({
  FRAME_TOO_LARGE: 'FRAME_TOO_LARGE',
  BINARY_FRAME: 'BINARY_FRAME',
  INVALID_UTF8: 'INVALID_UTF8',
  INVALID_JSON: 'INVALID_JSON',
  NOT_AN_OBJECT: 'NOT_AN_OBJECT',
  MISSING_TYPE: 'MISSING_TYPE',
  UNKNOWN_TYPE: 'UNKNOWN_TYPE',
  MISSING_FIELD: 'MISSING_FIELD',
  INVALID_FIELD: 'INVALID_FIELD',
  UNSUPPORTED_PROTOCOL_VERSION: 'UNSUPPORTED_PROTOCOL_VERSION',
  /** Valid frame, but not one this end accepts from that peer or at that moment. */
  UNEXPECTED_MESSAGE: 'UNEXPECTED_MESSAGE',
} as const);

export type FrameErrorCode = (typeof FRAME_ERROR_CODES)[keyof typeof FRAME_ERROR_CODES];

export interface FrameError {
  code: FrameErrorCode;
  message: string;
  /** The `id` of the rejected frame when it could be read, so a reply can name it in `ref`. */
  ref: string | null;
}

/** Thrown by `encode` when the caller builds an invalid message: a programming error, not input. */
export class InvalidMessageError extends Error {
  readonly code: FrameErrorCode;
  constructor(code: FrameErrorCode, message: string) {
    super(message);
    this.name = 'InvalidMessageError';
    this.code = code;
  }
}
