import type { Duplex } from 'node:stream';

// How many agent upgrades may be opening at once (from the upgrade to
// `welcome`). A restarted panel meets its whole fleet within seconds; past
// what it can open before the agents' connect timeout, every extra upgrade it
// accepts is work thrown away when that agent gives up and retries, and the
// panel collapses into timeouts (measured: 30,000–40,000 handshake timeouts
// for 10,000 agents on a loaded machine). Refusing the excess at once, before
// the token check, with 503 and Retry-After, costs almost nothing and sends
// those agents back to their (hinted, growing) backoff.

export class OpenAdmission {
  private readonly opening = new Set<Duplex>();

  constructor(private readonly maxOpening: number) {}

  /** An upgrade arrived: it counts until it is welcomed or its socket is gone. */
  arrived(socket: Duplex): void {
    this.opening.add(socket);
    socket.once('close', () => this.opening.delete(socket));
  }

  /** Welcomed (or refused by other means): it no longer counts. */
  done(socket: Duplex): void {
    this.opening.delete(socket);
  }

  /** Too many are opening: refuse this one before any work (it is dropped from the count). */
  refuse(socket: Duplex): boolean {
    if (this.opening.size <= this.maxOpening) return false;
    this.opening.delete(socket);
    return true;
  }

  get size(): number {
    return this.opening.size;
  }
}
