// Which registry an image reference names, as Docker reads it
// (distribution/reference's splitDockerDomain): the first path component is a
// registry host when it holds a "." or a ":" or is "localhost"; otherwise the
// image is Docker Hub's. Both apps use this one rule: the panel to pick a
// team's credentials for an image, the agent to know which registry a pull
// asks.

/** The one name of Docker Hub; its aliases map to it. */
export const DOCKER_HUB_HOST = 'docker.io';

const DOCKER_HUB_ALIASES: ReadonlySet<string> = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io']);

/**
 * A registry host as Tether stores and compares it: lower-case, the port kept,
 * Docker Hub's aliases as `docker.io`. A scheme or a trailing slash is dropped.
 */
export function normalizeRegistryHost(host: string): string {
  const bare = host.trim().toLowerCase().replace(/^https?:\/\//, '').replace(/\/+$/, '').replace(/\/v[12]$/, '');
  return DOCKER_HUB_ALIASES.has(bare) ? DOCKER_HUB_HOST : bare;
}

/** The registry host an image reference pulls from, normalised (`nginx` → `docker.io`). */
export function registryHostOf(image: string): string {
  const slash = image.indexOf('/');
  if (slash < 0) return DOCKER_HUB_HOST;
  const first = image.slice(0, slash);
  const isHost = first.includes('.') || first.includes(':') || first === 'localhost';
  return isHost ? normalizeRegistryHost(first) : DOCKER_HUB_HOST;
}
