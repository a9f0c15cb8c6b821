// The panel validates domains before they reach a map; the agent checks again
// because every string here ends up in Caddy's config, where `*`, `?`, `[`
// act as globs in path matchers and `{…}` is expanded as a placeholder in
// host, path and dial strings. Anything outside these shapes is refused, not
// escaped: there is no safe meaning for it.

const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const HOST_NAME = new RegExp(`^(?=.{1,253}$)${LABEL}(?:\\.${LABEL})*$`);
const IPV6 = /^\[[0-9a-f:.]{2,45}\]$/;

export function isValidDomain(domain: string): boolean {
  return HOST_NAME.test(domain);
}

export function isValidUpstream(upstream: string): boolean {
  const colon = upstream.lastIndexOf(':');
  if (colon <= 0) return false;
  const host = upstream.slice(0, colon);
  const port = upstream.slice(colon + 1);
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65_535) return false;
  return HOST_NAME.test(host) || IPV6.test(host);
}
