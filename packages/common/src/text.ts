// Two kinds of strings cross Tether's edges, with two rules (issue 14):
// - identifiers and names (message ids, node names, codes, refs) are refused
//   when they hold a control character or an unpaired surrogate, or are longer
//   than their documented bound;
// - free text (reasons, container output, error messages) is kept but made
//   safe before it is sent, stored, logged or put into a proxy config: valid
//   UTF-8, control characters escaped, NUL never kept (PostgreSQL rejects it).

/** C0 controls, DEL and C1 controls. */
const CONTROL = '\\u0000-\\u001f\\u007f-\\u009f';
/** Lone surrogates only: with the `u` flag a well-formed pair is one code point and does not match. */
const SURROGATE = '\\ud800-\\udfff';

/**
 * The JSON-schema pattern of an identifier (the `u` flag, which TypeBox uses,
 * is what makes the surrogate range match only unpaired ones).
 */
export const IDENTIFIER_PATTERN = `^[^${CONTROL}${SURROGATE}]*$`;
const IDENTIFIER = new RegExp(IDENTIFIER_PATTERN, 'u');

/** Default bound of an identifier, in UTF-16 code units. */
export const IDENTIFIER_MAX_LENGTH = 128;

/**
 * Why `value` is not an identifier of at most `maxLength` characters (not
 * empty, no control characters, no unpaired surrogates), or null when it is one.
 */
export function identifierProblem(value: unknown, maxLength = IDENTIFIER_MAX_LENGTH): string | null {
  if (typeof value !== 'string') return 'must be a string';
  if (value.length === 0) return 'must not be empty';
  if (value.length > maxLength) return `must be at most ${maxLength} characters`;
  if (!IDENTIFIER.test(value)) return 'must not contain control characters or unpaired surrogates';
  return null;
}

export function isIdentifier(value: unknown, maxLength = IDENTIFIER_MAX_LENGTH): value is string {
  return identifierProblem(value, maxLength) === null;
}

export interface TruncateOptions {
  /** Which end to keep: 'start' (default) cuts the tail; 'end' keeps the last characters (the useful part of output). */
  keep?: 'start' | 'end';
  /** Put where text was cut (default '…'); counted in `max`. */
  marker?: string;
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;
const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff;

/**
 * `text` cut to at most `max` UTF-16 code units, marker included, never
 * splitting a surrogate pair. Text that fits is returned unchanged.
 */
export function truncate(text: string, max: number, options: TruncateOptions = {}): string {
  if (text.length <= max) return text;
  const marker = (options.marker ?? '…').slice(0, Math.max(0, max));
  const room = Math.max(0, max - marker.length);
  if (options.keep === 'end') {
    let start = text.length - room;
    if (start < text.length && isLowSurrogate(text.charCodeAt(start))) start++;
    return marker + text.slice(start);
  }
  let end = room;
  if (end > 0 && isHighSurrogate(text.charCodeAt(end - 1))) end--;
  return text.slice(0, end) + marker;
}

export interface SanitizeOptions {
  /** Keep line feeds and tabs as they are (default true): multi-line output stays readable. */
  keepNewlines?: boolean;
  /** Cut the result to this many code units (after escaping). */
  maxLength?: number;
  /** Which end to keep when cutting (default 'start'). */
  keep?: 'start' | 'end';
}

const decoder = new TextDecoder('utf-8', { fatal: false });
const LONE_SURROGATE = new RegExp(`[${SURROGATE}]`, 'gu');
const ESCAPE_ALL = new RegExp(`[${CONTROL}]`, 'g');
const ESCAPE_KEEP_LINES = new RegExp(`(?![\\n\\t])[${CONTROL}]`, 'g');

const escapeControl = (char: string) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * Free text made safe to send, store and log: bytes are decoded as UTF-8 with
 * invalid sequences replaced by U+FFFD, unpaired surrogates replaced the same
 * way, and control characters (NUL, ESC, CR, DEL, C1, …) written as `\u00XX`
 * escapes; line feeds and tabs are kept unless `keepNewlines` is false.
 */
export function sanitizeText(input: string | Uint8Array, options: SanitizeOptions = {}): string {
  const text = typeof input === 'string' ? input.replace(LONE_SURROGATE, '\ufffd') : decoder.decode(input);
  const escaped = text.replace(options.keepNewlines === false ? ESCAPE_ALL : ESCAPE_KEEP_LINES, escapeControl);
  return options.maxLength === undefined ? escaped : truncate(escaped, options.maxLength, { keep: options.keep });
}
