import net from 'node:net';

// HTTP/1.1 by hand over real sockets from a chosen 127.0.0.x source address:
// edge tests need connections that never send a request, bodies sent a byte at
// a time, and upgrades on paths no client library would try.

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** ms from when the socket was connected to when the answer was complete. */
  ms: number;
}

/** A connected socket from `localAddress`; its answer (if any) is collected as it comes. */
export class RawConnection {
  readonly socket: net.Socket;
  private data = '';
  private connectedAt = 0;
  closed = false;
  private readonly waiters = new Set<() => void>();

  private constructor(port: number, localAddress: string) {
    this.socket = net.connect({ host: '127.0.0.1', port, localAddress });
    this.socket.setEncoding('utf8');
    this.socket.on('data', (chunk: string) => {
      this.data += chunk;
      this.wake();
    });
    this.socket.on('error', () => undefined);
    this.socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  static open(port: number, localAddress: string): Promise<RawConnection> {
    const c = new RawConnection(port, localAddress);
    return new Promise((resolve, reject) => {
      c.socket.once('connect', () => {
        c.connectedAt = performance.now();
        resolve(c);
      });
      c.socket.once('error', reject);
    });
  }

  write(text: string): void {
    if (!this.socket.destroyed) this.socket.write(text);
  }

  /** The first complete answer (status line, headers, Content-Length body), or null if the socket closed without one. */
  answer(timeoutMs = 5_000): Promise<RawAnswer | null> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const parsed = parse(this.data);
        if (parsed || this.closed) {
          clearTimeout(timer);
          this.waiters.delete(check);
          resolve(parsed ? { ...parsed, ms: performance.now() - this.connectedAt } : null);
        }
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`no answer within ${timeoutMs} ms (got ${JSON.stringify(this.data.slice(0, 200))})`));
      }, timeoutMs);
      this.waiters.add(check);
      check();
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }
}

function parse(text: string): Omit<RawAnswer, 'ms'> | null {
  const end = text.indexOf('\r\n\r\n');
  if (end === -1) return null;
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const status = Number(statusLine!.split(' ')[1]);
  // A 101 has no body; otherwise the body is as long as it says.
  const length = status === 101 ? 0 : Number(headers['content-length'] ?? 0);
  const body = text.slice(end + 4);
  if (Buffer.byteLength(body) < length) return null;
  return { status, headers, body: body.slice(0, length) };
}

/** A WebSocket upgrade request for `path` (no token unless given). */
export function upgradeRequest(path: string, token?: string): string {
  return (
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
    `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
    (token ? `Authorization: Bearer ${token}\r\n` : '') +
    '\r\n'
  );
}
