/** `host:port` (`[v6]:port` too) split at its last colon, the host without brackets; the caller has validated the shape. */
export function splitHostPort(value: string): { host: string; port: number } {
  const colon = value.lastIndexOf(':');
  return { host: value.slice(0, colon).replace(/^\[|\]$/g, ''), port: Number(value.slice(colon + 1)) };
}
