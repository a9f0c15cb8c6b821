import type { Socket } from 'node:net';
import type { Server } from 'node:http';

// Connections one source address may hold before it has proved anything: a
// socket costs the panel memory and a place in every bound behind it, and
// nobody has to authenticate to open one. Counted at accept, before any
// request is read; a socket that becomes an agent session (a node token
// checked, a hello answered) stops counting, so a fleet behind one NAT address
// is bounded only while its upgrades are opening. The connection over the cap
// is not read as a request at all: http/edges.ts answers it 429
// TOO_MANY_CONNECTIONS (and the upgrade gate for an upgrade) and closes it.

/** How long a refused socket may stay to read its answer. */
const REFUSED_LINGER_MS = 2_000;

export class ConnectionCap {
  private readonly perAddress = new Map<string, number>();
  private readonly counted = new WeakMap<Socket, string>();
  private readonly refused = new WeakSet<Socket>();
  refusedTotal = 0;

  constructor(private readonly maxPerAddress: number) {}

  /** Counts every connection the server accepts (before its own connection listener reads a byte). */
  attach(server: Server): () => void {
    const onConnection = (socket: Socket) => this.accepted(socket);
    server.prependListener('connection', onConnection);
    return () => void server.off('connection', onConnection);
  }

  accepted(socket: Socket): void {
    const address = socket.remoteAddress ?? '';
    const held = this.perAddress.get(address) ?? 0;
    if (held >= this.maxPerAddress) {
      this.refused.add(socket);
      this.refusedTotal++;
      // Whatever it sends next is answered 429 and the socket closed; one that sends nothing goes soon.
      setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
      return;
    }
    this.perAddress.set(address, held + 1);
    this.counted.set(socket, address);
    socket.once('close', () => this.release(socket));
  }

  /** Over the cap at accept: answer TOO_MANY_CONNECTIONS and close. */
  isRefused(socket: Socket | object): boolean {
    return this.refused.has(socket as Socket);
  }

  /** No longer counted (closed, or now an authenticated agent session). */
  release(socket: Socket): void {
    const address = this.counted.get(socket);
    if (address === undefined) return;
    this.counted.delete(socket);
    const held = (this.perAddress.get(address) ?? 1) - 1;
    if (held > 0) this.perAddress.set(address, held);
    else this.perAddress.delete(address);
  }

  heldBy(address: string): number {
    return this.perAddress.get(address) ?? 0;
  }
}
