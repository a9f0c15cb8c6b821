import { isIP } from 'node:net';

// The one spelling of a published endpoint (capability routing.remote): the
// node's private address with the host port Docker picked, as
// allocations.status reports it and routing maps carry it back to every node.

/** A port Docker published: the container port (`8080/tcp`) and the host side of its binding. */
export interface PortBinding {
  containerPort: string;
  hostIp: string;
  hostPort: number;
}

/**
 * An IP literal in one spelling (IPv6 compressed and lower case, as URL writes it), so the address the agent asked
 * Docker for and the one Docker reports compare equal however an operator wrote it.
 */
export function canonicalIp(ip: string): string {
  return isIP(ip) === 6 ? new URL(`http://[${ip}]/`).hostname.slice(1, -1) : ip;
}

/** `address:port`, an IPv6 address in brackets. */
export function endpointOf(address: string, port: number): string {
  return isIP(address) === 6 ? `[${address}]:${port}` : `${address}:${port}`;
}

/** Where `containerPort` is published on `address`; null when it is not (a container made without the binding). */
export function publishedEndpoint(ports: readonly PortBinding[] | undefined, address: string, containerPort: number): string | null {
  const wanted = canonicalIp(address);
  const binding = ports?.find((p) => p.containerPort === `${containerPort}/tcp` && p.hostPort > 0 && canonicalIp(p.hostIp) === wanted);
  return binding ? endpointOf(wanted, binding.hostPort) : null;
}
