import { serviceUpstreamHost } from '@tether/protocol';
import type { ProxyTraffic } from '../controllers.js';
import type { CaddyAdmin, UpstreamLoad } from './caddy-admin.js';
import { ANSWER_ZONE, TARGETS_LABEL } from './static-answers.js';

// What a drain asks Caddy (docs/architecture.md, "Drain"): `GET /reverse_proxy/upstreams`
// lists every upstream in use with its requests in flight (`num_requests`); measured on
// 2.6.2, an open WebSocket counts 1 for as long as it is open, and a dynamic (SRV)
// upstream is listed under its target name while a request to it is in flight.
//  - static answers: each container is its own target, `c-<id12>.e.rt.tether.internal.:<port>`,
//    so what is open on the old containers is counted exactly;
//  - config mode: every container of the service sits behind the alias `svc-<id>:<port>`,
//    so only the service's total is known.

const hostOf = (address: string) => address.slice(0, address.lastIndexOf(':')).replace(/\.$/, '').toLowerCase();

/** The SRV target name of a container in the static answers (static-answers.ts). */
export const containerTarget = (id: string) => `c-${id.slice(0, 12).toLowerCase()}.${TARGETS_LABEL}.${ANSWER_ZONE}`;

/** Requests and streams in flight to these containers (`container`) or to the service's alias (`service`). Pure. */
export function openOn(loads: readonly UpstreamLoad[], counting: ProxyTraffic['counting'], serviceId: string, containerIds: readonly string[]): number {
  const hosts = new Set(counting === 'container' ? containerIds.map(containerTarget) : [serviceUpstreamHost(serviceId)]);
  let open = 0;
  for (const load of loads) if (hosts.has(hostOf(load.address))) open += load.numRequests;
  return open;
}

export function caddyTraffic(o: { admin: Pick<CaddyAdmin, 'upstreams'>; counting: ProxyTraffic['counting']; switchAnswers?: () => Promise<void> }): ProxyTraffic {
  return {
    counting: o.counting,
    switchAnswers: o.switchAnswers ?? (() => Promise.resolve()),
    openConnections: async (serviceId, containerIds) => openOn(await o.admin.upstreams(), o.counting, serviceId, containerIds),
  };
}
