import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type Docker from 'dockerode';
import { LABELS } from '../docker/docker-client.js';
import { splitHostPort } from '@tether/common';
import type { Endpoint, EndpointMap } from './static-answers.js';

// Which containers of each service Caddy may dial now: running service
// containers on Tether's network, minus those whose health check has not
// passed: the image's HEALTHCHECK (Docker's status says so) or the service's
// HTTP check (`notServing`, the agent's health monitor, draining ones too).
// Those left out are still listed with `serving: false` while they run: their
// address stays answerable for a lookup Caddy cached before they left (see
// Endpoint). One `docker ps` per refresh; the answers change only when this
// set does.

export type EndpointSource = () => Promise<EndpointMap>;

export function dockerEndpoints(docker: Docker, options: { network: string; node?: string; notServing?: () => ReadonlySet<string> }): EndpointSource {
  return async () => {
    const label = [`${LABELS.managed}=true`, LABELS.service];
    if (options.node) label.push(`${LABELS.node}=${options.node}`);
    const containers = await docker.listContainers({ filters: { label, status: ['running'] } });
    const byService = new Map<string, Endpoint[]>();
    const excluded = options.notServing?.() ?? new Set<string>();
    for (const c of containers) {
      const serving = !/\((unhealthy|health: starting)\)/.test(c.Status) && !excluded.has(c.Id);
      const service = c.Labels[LABELS.service];
      const net = c.NetworkSettings?.Networks?.[options.network];
      const ip = net?.IPAddress || net?.GlobalIPv6Address;
      if (!service || !ip) continue;
      const list = byService.get(service) ?? [];
      list.push(serving ? { id: c.Id, ip } : { id: c.Id, ip, serving: false });
      byService.set(service, list);
    }
    for (const list of byService.values()) list.sort((a, b) => (a.id < b.id ? -1 : 1));
    return byService;
  };
}

/**
 * An upstream `host:port` with its host as an address, or null when the name
 * does not resolve now. Caddy asks only the answerer, which serves addresses,
 * so a name (the compose file's canary upstream `tether-agent:9081`) is looked
 * up by the agent, with the resolver it has (Docker's, for an agent in a container).
 */
export async function upstreamByAddress(upstream: string): Promise<string | null> {
  const { host, port } = splitHostPort(upstream);
  if (isIP(host)) return upstream;
  try {
    const { address, family } = await lookup(host);
    return family === 6 ? `[${address}]:${port}` : `${address}:${port}`;
  } catch {
    return null;
  }
}
