import type Docker from 'dockerode';
import { LABELS } from '../docker/docker-client.js';
import type { Endpoint, EndpointMap } from './static-answers.js';

// Which containers of each service Caddy may dial now: running service
// containers on Tether's network, minus those whose health check has not
// passed: the image's HEALTHCHECK (Docker's status says so) or the service's
// HTTP check (`notServing`, the agent's health monitor). One `docker ps` per
// refresh; the answers change only when this set does.

export type EndpointSource = () => Promise<EndpointMap>;

export function dockerEndpoints(docker: Docker, options: { network: string; node?: string; notServing?: () => ReadonlySet<string> }): EndpointSource {
  return async () => {
    const label = [`${LABELS.managed}=true`, LABELS.service];
    if (options.node) label.push(`${LABELS.node}=${options.node}`);
    const containers = await docker.listContainers({ filters: { label, status: ['running'] } });
    const byService = new Map<string, Endpoint[]>();
    const excluded = options.notServing?.() ?? new Set<string>();
    for (const c of containers) {
      if (/\((unhealthy|health: starting)\)/.test(c.Status) || excluded.has(c.Id)) continue;
      const service = c.Labels[LABELS.service];
      const net = c.NetworkSettings?.Networks?.[options.network];
      const ip = net?.IPAddress || net?.GlobalIPv6Address;
      if (!service || !ip) continue;
      const list = byService.get(service) ?? [];
      list.push({ id: c.Id, ip });
      byService.set(service, list);
    }
    for (const list of byService.values()) list.sort((a, b) => (a.id < b.id ? -1 : 1));
    return byService;
  };
}
