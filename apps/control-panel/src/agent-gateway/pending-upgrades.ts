import type { Duplex } from 'node:stream';

// An upgrade socket belongs to nobody until it is a session: when its request is answered with an error
// (401, 403, or Fastify's 503 while the panel closes) the server, which allows half-open sockets, leaves it
// open; the agent closes its end and the panel's stays in CLOSE-WAIT, which holds the server's close. Seen
// as a 30 s shutdown during a reconnect storm. So every upgrade is tracked until it is a session or gone,
// and those still pending a grace into the close are destroyed. Upgrades the gate refuses (another path,
// an address over its cap, the panel closing) never get this far and never count as opening.

export class PendingUpgrades {
  readonly #sockets = new Set<Duplex>();
  #closing = false;

  constructor(private readonly graceMs = 1_000) {}

  /** True once the panel closes: new upgrades are refused NOT_READY. */
  get closing(): boolean {
    return this.#closing;
  }

  add(socket: Duplex): void {
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
  }

  /** The upgrade became a session: no longer this tracker's to destroy. */
  settled(socket: Duplex): void {
    this.#sockets.delete(socket);
  }

  close(): void {
    this.#closing = true;
    setTimeout(() => {
      for (const socket of this.#sockets) socket.destroy();
    }, this.graceMs).unref();
  }
}
