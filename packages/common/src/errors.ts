// One base for every coded error in Tether (the pattern of undici's errors):
// a stable machine `code`, a human `message` and the `cause` it came from.
// Each failure gets its own subclass, so callers can `instanceof` it, and
// every code lives in one catalog per area, built with `defineErrorCatalog`,
// so docs and tests can list them all.

/** Upper snake case, at most 64 characters: the shape of every code on the wire and in rows. */
export const ERROR_CODE_PATTERN = /^[A-Z][A-Z0-9_]{0,63}$/;

export class CodedError<C extends string = string> extends Error {
  readonly code: C;
  constructor(code: C, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    // The subclass's own name, so logs and stacks say `AckTimeoutError`, not `Error`.
    this.name = new.target.name;
  }
}

/**
 * Freezes a catalog of codes (code → what it means, or any entry such as
 * `{ status, message }`) after checking every code's shape. Throws on a bad
 * code at import, so a typo never reaches the wire.
 */
export function defineErrorCatalog<const T extends Record<string, unknown>>(entries: T): Readonly<T> {
  for (const code of Object.keys(entries)) {
    if (!ERROR_CODE_PATTERN.test(code)) throw new Error(`error code ${JSON.stringify(code)} is not UPPER_SNAKE_CASE of at most 64 characters`);
  }
  return Object.freeze({ ...entries });
}

/** `{ CODE: 'CODE' }` for every code of a catalog, so code refers to `CODES.X` and never to a bare string. */
export function catalogCodes<T extends Record<string, unknown>>(catalog: T): { readonly [K in keyof T & string]: K } {
  return Object.freeze(Object.fromEntries(Object.keys(catalog).map((code) => [code, code]))) as { readonly [K in keyof T & string]: K };
}

/**
 * One catalog made of several (runtime, proxy, session, …). Throws when two
 * areas define the same code, so a code always means one thing.
 */
export function mergeErrorCatalogs<const T extends readonly Record<string, unknown>[]>(...catalogs: T): Readonly<UnionToIntersection<T[number]>> {
  const merged: Record<string, unknown> = {};
  for (const catalog of catalogs) {
    for (const [code, entry] of Object.entries(catalog)) {
      if (Object.hasOwn(merged, code)) throw new Error(`error code ${code} is defined twice`);
      merged[code] = entry;
    }
  }
  return Object.freeze(merged) as Readonly<UnionToIntersection<T[number]>>;
}

type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (x: infer I) => void ? I : never;

/** Whether `code` is one of the catalog's codes. */
export function isCatalogued<T extends Record<string, unknown>>(catalog: T, code: unknown): code is keyof T & string {
  return typeof code === 'string' && Object.hasOwn(catalog, code);
}

/** The message of anything thrown. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The `code` of anything thrown, when it has a string one. */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}
