import http from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

// TETHER_INTERNAL_LISTEN: the panels' internal surface (/internal/v1) on a
// listener of its own, so an operator can keep it on a private address while
// the API is public. One Fastify app serves both: the second server hands its
// requests to the app's router, so the internal routes keep their hooks,
// credential check and error shape. Which listener a request came in on is
// known by its socket; /internal/v1 on the public listener, and anything else
// on the internal one, answer the not-found handler's 404, as a path that
// does not exist. No upgrades on the internal listener (no 'upgrade' handler:
// Node closes such a socket). buildApp makes the server, server.ts listens.

export const INTERNAL_PREFIX = '/internal/v1';

export interface InternalListener {
  /** Listens and returns the address bound (port 0: a free one). */
  listen(at: { host: string; port: number }): Promise<{ address: string; family: string; port: number }>;
  readonly server: http.Server;
  /** Closes it and every connection it holds (internal log streams last as long as their callers). */
  close(): Promise<void>;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The separate listener of /internal/v1 (TETHER_INTERNAL_LISTEN), when configured. */
    internalListener: InternalListener | undefined;
  }
}

const isInternalPath = (url: string) => url === INTERNAL_PREFIX || url.startsWith(`${INTERNAL_PREFIX}/`) || url.startsWith(`${INTERNAL_PREFIX}?`);

/** Call before any route or other onRequest hook: a request on the wrong listener is refused before any other work. */
export function separateInternalSurface(app: FastifyInstance): InternalListener {
  const sockets = new WeakSet<Socket>();
  const server = http.createServer();
  // The public server's bounds on a request (headers and body deadline, keep-alive).
  server.requestTimeout = app.server.requestTimeout;
  server.headersTimeout = app.server.headersTimeout;
  server.keepAliveTimeout = app.server.keepAliveTimeout;
  server.on('connection', (socket: Socket) => sockets.add(socket));
  server.on('request', (req, res) => app.routing(req, res));
  server.on('clientError', (_err, socket: Socket) => socket.destroy());
  app.addHook('onRequest', async (request, reply) => {
    if (sockets.has(request.raw.socket) !== isInternalPath(request.url)) {
      reply.callNotFound();
      return reply;
    }
  });
  return {
    server,
    async close() {
      if (!server.listening) return;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
    async listen(at) {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen({ host: at.host, port: at.port }, () => {
          server.off('error', reject);
          resolve();
        });
      });
      const address = server.address();
      if (!address || typeof address === 'string') throw new Error('the internal listener has no TCP address');
      return address;
    },
  };
}

/** The URL other panels dial for an address a listener bound; undefined for a wildcard, which no other panel can dial. */
export function dialableUrl(address: { address: string; family: string; port: number }): string | undefined {
  if (address.address === '0.0.0.0' || address.address === '::') return undefined;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}
