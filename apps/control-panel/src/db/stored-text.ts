// Text PostgreSQL cannot store: NUL in text (SQLSTATE 22021) and in jsonb
// (22P05), and unpaired UTF-16 surrogates (no UTF-8 form). Checked at the
// edge (http/request-guards.ts) and before a caller's text goes into a row
// written behind its back (audit refusals).

const LONE_SURROGATE = /\p{Surrogate}/u;
const unstorable = (s: string) => s.includes('\u0000') || LONE_SURROGATE.test(s);

/** The first string (or object key) under `value` that PostgreSQL cannot store, as `part/field/…`, or null. */
export function unstorableField(value: unknown, part: string): string | null {
  return firstBadString(value, part, unstorable);
}

/**
 * The path (`part/field/…`, JSON-pointer escaped) of the first string or object key under `value` for which `bad`
 * holds, or null. Iterative, so a deeply nested body cannot overflow the stack.
 */
export function firstBadString(value: unknown, part: string, bad: (s: string) => boolean): string | null {
  const stack: [unknown, string][] = [[value, part]];
  while (stack.length > 0) {
    const [v, at] = stack.pop()!;
    if (typeof v === 'string') {
      if (bad(v)) return at;
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${at}/${i}`]);
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, inner] = entries[i]!;
        const path = `${at}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
        if (bad(key)) return path;
        stack.push([inner, path]);
      }
    }
  }
  return null;
}
