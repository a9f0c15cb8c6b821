import type { ProxyTraffic } from '../controllers.js';
import type { CaddyAdmin, UpstreamLoad } from './caddy-admin.js';
import { ANSWER_ZONE, TARGETS_LABEL } from './static-answers.js';

// What a drain asks Caddy (docs/architecture.md, "Drain"): `GET /reverse_proxy/upstreams`
// lists every upstream in use with its requests in flight (`num_requests`); measured on
// 2.6.2, an open WebSocket counts 1 for as long as it is open, and a dynamic (SRV)
// upstream is listed under its target name while a request to it is in flight. Each
// container is its own target in the answers, `c-<id12>.e.rt.tether.internal.:<port>`,
// and a route looked up by address (static-answers.ts LOOKUP_SRV) is listed under the
// container's own address on Tether's network, so what is open on the old containers is
// counted exactly.

const hostOf = (address: string) =>
  address
    .slice(0, address.lastIndexOf(':'))
    .replace(/\.$/, '')
    .replace(/^\[(.*)\]$/, '$1')
    .toLowerCase();

/** The SRV target name of a container in the static answers (static-answers.ts). */
export const containerTarget = (id: string) => `c-${id.slice(0, 12).toLowerCase()}.${TARGETS_LABEL}.${ANSWER_ZONE}`;

/** Requests and streams in flight to these containers (by target name, or by `addresses`: theirs on Tether's network). Pure. */
export function openOn(loads: readonly UpstreamLoad[], containerIds: readonly string[], addresses: readonly string[] = []): number {
  const hosts = new Set([...containerIds.map(containerTarget), ...addresses.map((a) => a.toLowerCase())]);
  let open = 0;
  for (const load of loads) if (hosts.has(hostOf(load.address))) open += load.numRequests;
  return open;
}

export function caddyTraffic(o: {
  admin: Pick<CaddyAdmin, 'upstreams'>;
  switchAnswers: () => Promise<void>;
  addressesOf: (containerIds: readonly string[]) => Promise<string[]>;
}): ProxyTraffic {
  return {
    switchAnswers: o.switchAnswers,
    openConnections: async (containerIds) => openOn(await o.admin.upstreams(), containerIds, await o.addressesOf(containerIds)),
  };
}
