import http from 'node:http';
import { WebSocket, WebSocketServer } from 'ws';

// A customer's long-lived connection: a WebSocket echo service on loopback,
// and a client that reaches it through Caddy by Host header.

export interface EchoServer {
  port: number;
  close(): Promise<void>;
}

export async function startEchoServer(host = '127.0.0.1'): Promise<EchoServer> {
  const server = http.createServer((_req, res) => res.end('echo service'));
  const wss = new WebSocketServer({ server });
  wss.on('connection', (socket) => {
    socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }));
    // On a reload Caddy 2.6 sends the upstream an unmasked close frame, which ws rejects as a protocol error.
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as { port: number }).port,
    async close() {
      for (const client of wss.clients) client.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface EchoClient {
  /** Sends `text` and resolves with the next message (rejects after 3 s or on close). */
  echo(text: string): Promise<string>;
  readonly open: boolean;
  /** Resolves with the close code once the connection closes. */
  readonly closed: Promise<number>;
  close(): void;
}

export async function connectThroughProxy(httpPort: number, domain: string): Promise<EchoClient> {
  const socket = new WebSocket(`ws://127.0.0.1:${httpPort}/`, { headers: { host: domain } });
  const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  return {
    get open() {
      return socket.readyState === WebSocket.OPEN;
    },
    closed,
    close: () => socket.close(),
    echo(text) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no echo within 3 s')), 3_000);
        socket.once('message', (data: Buffer) => {
          clearTimeout(timer);
          resolve(data.toString('utf8'));
        });
        void closed.then((code) => {
          clearTimeout(timer);
          reject(new Error(`closed with ${code} before the echo`));
        });
        socket.send(text);
      });
    },
  };
}
