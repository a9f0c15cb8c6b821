import type { Route } from '@tether/protocol';
import { ProxyError } from './errors.js';

// The panel validates domains before they reach a map; the agent checks again
// because every string here ends up in Caddy's config, where `*`, `?`, `[`
// act as globs in path matchers and `{…}` is expanded as a placeholder in
// host, path and dial strings. Anything outside these shapes is refused, not
// escaped: there is no safe meaning for it.

const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const HOST_NAME = new RegExp(`^(?=.{1,253}$)${LABEL}(?:\\.${LABEL})*$`);
const IPV6 = /^\[[0-9a-f:.]{2,45}\]$/;
// RFC 3986 path characters minus the ones Caddy's path matcher treats as syntax.
const PATH_PREFIX = /^\/[A-Za-z0-9._~!$&'()+,;=:@%/-]{0,1023}$/;

export function isValidDomain(domain: string): boolean {
  return HOST_NAME.test(domain);
}

export function isValidPathPrefix(prefix: string): boolean {
  return PATH_PREFIX.test(prefix);
}

export function isValidUpstream(upstream: string): boolean {
  const colon = upstream.lastIndexOf(':');
  if (colon <= 0) return false;
  const host = upstream.slice(0, colon);
  const port = upstream.slice(colon + 1);
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65_535) return false;
  return HOST_NAME.test(host) || IPV6.test(host);
}

/** Throws PROXY_INVALID_ROUTE naming the first route that cannot be rendered. */
export function assertRenderableRoutes(routes: readonly Route[]): void {
  for (const route of routes) {
    const problem = !isValidDomain(route.domain)
      ? 'domain is not a lowercase host name'
      : route.pathPrefix !== null && !isValidPathPrefix(route.pathPrefix)
        ? 'path prefix must start with / and contain only plain URL path characters'
        : !isValidUpstream(route.upstream)
          ? 'upstream must be host:port'
          : null;
    if (problem) {
      const shown = JSON.stringify({ domain: route.domain, pathPrefix: route.pathPrefix, upstream: route.upstream }).slice(0, 300);
      throw new ProxyError('PROXY_INVALID_ROUTE', `${problem}: ${shown}`);
    }
  }
}
