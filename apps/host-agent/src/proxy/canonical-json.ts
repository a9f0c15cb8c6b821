// Caddy re-serialises the config it holds (Go maps: sorted keys, its own
// escaping), so "is Caddy running what we rendered" compares canonical forms:
// parsed, keys sorted at every level, re-stringified.

function keysSorted(keys: string[]): boolean {
  for (let i = 1; i < keys.length; i += 1) if ((keys[i - 1] as string) > (keys[i] as string)) return false;
  return true;
}

/** The value with keys sorted at every level; parts already in order are returned as they are (no copy). */
function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) {
    let copy: unknown[] | null = null;
    value.forEach((item, i) => {
      const sorted = sortKeys(item);
      if (sorted !== item) (copy ??= [...value])[i] = sorted;
    });
    return copy ?? value;
  }
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  const inOrder = keysSorted(keys);
  let out: Record<string, unknown> | null = null;
  for (const key of inOrder ? keys : [...keys].sort()) {
    const sorted = sortKeys(record[key]);
    if (out === null && inOrder && sorted === record[key]) continue;
    if (out === null) {
      // A null-prototype object keeps a "__proto__" key as data instead of treating it as the prototype setter.
      out = Object.create(null) as Record<string, unknown>;
      for (const earlier of inOrder ? keys.slice(0, keys.indexOf(key)) : []) out[earlier] = record[earlier];
    }
    out[key] = sorted;
  }
  return out ?? value;
}

/** JSON text with object keys sorted at every level: equal values give equal strings. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value)) ?? 'null';
}

/** Whether JSON text (as a proxy reports it) holds the same value as canonical JSON `expected`. */
export function matchesCanonicalJson(text: string, expected: string): boolean {
  // Caddy's serialisation usually is the canonical form byte for byte: skip the parse then.
  if (text.trim() === expected) return true;
  try {
    return canonicalJson(JSON.parse(text)) === expected;
  } catch {
    return false;
  }
}
