// Readers of jsonb columns whose shape the database does not enforce: what is
// not of the shape reads as empty rather than reaching a presenter as is.

/** An object of strings (node labels, a placement's labels); other entries and other values read as none. */
export function stringRecordOf(value: unknown): Record<string, string> {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return {};
  return Object.fromEntries(Object.entries(value).filter((e): e is [string, string] => typeof e[1] === 'string'));
}
