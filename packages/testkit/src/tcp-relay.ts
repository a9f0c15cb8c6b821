import net from 'node:net';

// A TCP relay a test can cut, like a network partition between one process
// and a server: while paused, no byte moves in either direction and new
// connections are accepted but not forwarded (the peer sees silence, no FIN,
// no RST, exactly as when packets are dropped); resume() lets everything flow
// again, held connections included. Loopback only.

export interface TcpRelay {
  /** The relay's port on 127.0.0.1. */
  port: number;
  /** Rewrites a URL's port to the relay's (e.g. a DATABASE_URL). */
  via(url: string): string;
  pause(): void;
  resume(): void;
  /** New connections go to this port from now on (a moved endpoint); connections already relayed stay where they are. */
  retarget(port: number): void;
  readonly paused: boolean;
  close(): Promise<void>;
}

export async function startTcpRelay(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpRelay> {
  let paused = false;
  let port = targetPort;
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket | undefined; connect(): void }>();

  const server = net.createServer((client) => {
    const pair: { client: net.Socket; upstream: net.Socket | undefined; connect(): void } = {
      client,
      upstream: undefined,
      connect() {
        if (pair.upstream) return;
        const upstream = net.connect(port, targetHost);
        pair.upstream = upstream;
        client.pipe(upstream);
        upstream.pipe(client);
        const end = () => {
          client.destroy();
          upstream.destroy();
          pairs.delete(pair);
        };
        upstream.on('error', end);
        upstream.on('close', end);
        client.on('error', end);
        client.on('close', end);
      },
    };
    pairs.add(pair);
    if (paused) {
      client.pause();
      client.on('error', () => client.destroy());
      return;
    }
    pair.connect();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const relayPort = (server.address() as net.AddressInfo).port;

  return {
    port: relayPort,
    retarget(next: number) {
      port = next;
    },
    via(url: string) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(relayPort);
      return u.toString();
    },
    pause() {
      paused = true;
      // Unpiped as well as paused: a piped stream resumes by itself whenever its destination drains.
      for (const p of pairs) {
        if (p.upstream) {
          p.client.unpipe(p.upstream);
          p.upstream.unpipe(p.client);
          p.upstream.pause();
        }
        p.client.pause();
      }
    },
    resume() {
      paused = false;
      for (const p of pairs) {
        if (!p.upstream) {
          p.connect();
          continue;
        }
        p.client.pipe(p.upstream);
        p.upstream.pipe(p.client);
      }
    },
    get paused() {
      return paused;
    },
    async close() {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream?.destroy();
      }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
