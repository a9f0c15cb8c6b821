import Type, { type TSchema, type TNull, type TString, type TUnion } from 'typebox';
import { IDENTIFIER_PATTERN } from './text.js';

/** `T` or null: the one way Tether's schemas say a field may be empty. */
export function Nullable<T extends TSchema>(schema: T, options?: Record<string, unknown>): TUnion<[T, TNull]> {
  return Type.Union([schema, Type.Null()], options);
}

/**
 * A string identifier or name: 1..maxLength characters, no control characters,
 * no unpaired surrogates (see `identifierProblem`).
 */
export function Identifier(maxLength: number, options: Record<string, unknown> = {}): TString {
  return Type.String({ minLength: 1, maxLength, pattern: IDENTIFIER_PATTERN, ...options });
}
