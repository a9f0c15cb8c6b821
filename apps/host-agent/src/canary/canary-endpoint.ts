import http from 'node:http';
import type { Socket } from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import { WebSocketServer, type WebSocket } from 'ws';

// The canary's far end: a tiny HTTP + WebSocket server inside the agent
// itself, reached only through the agent's own Caddy (canary server,
// canary.tether.internal). Served by the agent rather than a container: there
// is no image to build or pull, it lives and dies with the agent (so "closed
// by anything but the agent" is exactly what the monitor sees), and it works
// the same in container and external mode. Every request must carry the
// per-agent secret header, so nothing else that reaches the port can use it.

export const CANARY_SECRET_HEADER = 'x-tether-canary-secret';
export const CANARY_PROBE_PATH = '/probe';
export const CANARY_SOCKET_PATH = '/socket';

export interface CanaryEndpoint {
  readonly port: number;
  /** Open WebSockets (tests). */
  readonly sockets: number;
  close(): Promise<void>;
}

function secretMatches(given: string | string[] | undefined, secret: Buffer): boolean {
  if (typeof given !== 'string') return false;
  const bytes = Buffer.from(given);
  return bytes.length === secret.length && timingSafeEqual(bytes, secret);
}

/** Listens on `host:port`; answers GET /probe with 200 and echoes every text message on /socket. */
export async function startCanaryEndpoint(options: { host: string; port: number; secret: string }): Promise<CanaryEndpoint> {
  const secret = Buffer.from(options.secret);
  const connections = new Set<Socket>();
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4096 });
  const server = http.createServer((req, res) => {
    if (!secretMatches(req.headers[CANARY_SECRET_HEADER], secret)) {
      res.writeHead(403).end();
      return;
    }
    if (req.method === 'GET' && req.url === CANARY_PROBE_PATH) {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    res.writeHead(404).end();
  });
  server.on('upgrade', (req, socket, head) => {
    if (!secretMatches(req.headers[CANARY_SECRET_HEADER], secret) || req.url !== CANARY_SOCKET_PATH) {
      socket.end('HTTP/1.1 403 Forbidden\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
      ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
      ws.on('error', () => undefined);
    });
  });
  server.on('connection', (socket) => {
    connections.add(socket);
    socket.on('close', () => connections.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as { port: number }).port,
    get sockets() {
      return wss.clients.size;
    },
    async close() {
      for (const ws of wss.clients) ws.terminate();
      for (const socket of connections) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
