// `host:port` in one place for both apps (issue 35: it was parsed five ways).

/** `host:port` (`[v6]:port` too) split at its last colon, the host without brackets; the caller has validated the shape. */
export function splitHostPort(value: string): { host: string; port: number } {
  const colon = value.lastIndexOf(':');
  return { host: value.slice(0, colon).replace(/^\[|\]$/g, ''), port: Number(value.slice(colon + 1)) };
}

const HOST_PORT = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

/** A host name, IPv4 or bracketed IPv6 address and a port 0–65535 (0: any free one); undefined for anything else. */
export function parseHostPort(value: string): { host: string; port: number } | undefined {
  const trimmed = value.trim();
  const match = HOST_PORT.exec(trimmed);
  if (!match || Number(match[2]) > 65_535) return undefined;
  return splitHostPort(trimmed);
}
