import type { EndpointMap } from './static-answers.js';

/**
 * Containers' addresses as last read for the answers, by the first 12 characters of their id: Caddy lists a route
 * looked up by address under the container's IP, so a drain counts open connections by address too.
 */
export class ContainerAddresses {
  private addresses = new Map<string, string>();

  constructor(private readonly read: () => Promise<EndpointMap>) {}

  remember(endpoints: EndpointMap): void {
    this.addresses = new Map([...endpoints.values()].flat().map((e) => [key(e.id), e.ip.toLowerCase()]));
  }

  /** The addresses of these containers; read again for one not seen yet (a drain resumed after a restart). */
  async of(ids: readonly string[]): Promise<string[]> {
    if (ids.some((id) => !this.addresses.has(key(id)))) this.remember(await this.read());
    return ids.flatMap((id) => this.addresses.get(key(id)) ?? []);
  }
}

const key = (id: string) => id.slice(0, 12).toLowerCase();
