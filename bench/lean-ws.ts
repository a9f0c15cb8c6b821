// A lean WebSocket client for the load generators (bench/fleet-agents.ts):
// the same bytes on the wire as `ws` for what a simulated agent does (one
// upgrade request, masked text frames out; text, continuation, close and ping
// frames in), without the HTTP client, the per-connect random key and
// SHA-1 check, or the stream layers. The fleet bench runs 10,000 of these on
// the same two cores as the panel it measures: with `ws` the generators took
// 0.6-0.9 of a core during a reconnect storm, a third of it in building
// the client request of each connect (docs/benchmarks.md). Not for anything
// but benches: it trusts the server (no accept-key check, no size limits).
import { EventEmitter } from 'node:events';
import net from 'node:net';

const CONNECTING = 0;
const OPEN = 1;
const CLOSING = 2;
const CLOSED = 3;
// A fixed key is valid for the server (it only hashes it); the client skips checking the answer.
const KEY = 'dGV0aGVyLWJlbmNoLWtleQ==';
// The mask key is the client's to choose; all zeroes leaves the payload as it is (no copy to XOR).
const MASK = Buffer.alloc(4);

export interface LeanWsOptions {
  headers: Record<string, string>;
  localAddress?: string;
  handshakeTimeout: number;
}

/**
 * Events, as `ws` names them: `unexpected-response` (_, { statusCode, headers }) for an
 * answer other than 101, `open`, `message` (text), `error` (Error with code),
 * `close` (code, reason) once, last.
 */
export class LeanWs extends EventEmitter {
  static readonly OPEN = OPEN;
  readyState = CONNECTING;
  /** When TCP connected (ms since epoch; 0 before): the bench splits an open into its stages. */
  connectedAt = 0;
  private readonly socket: net.Socket;
  private head: Buffer | null = Buffer.alloc(0);
  private buffered = Buffer.alloc(0);
  private fragments: Buffer[] = [];
  private closeCode = 1006;
  private closeReason = '';
  private readonly timer: NodeJS.Timeout;

  constructor(url: string, options: LeanWsOptions) {
    super();
    const u = new URL(url);
    this.socket = net.connect({ host: u.hostname, port: Number(u.port), ...(options.localAddress ? { localAddress: options.localAddress } : {}) });
    this.socket.setNoDelay(true);
    this.socket.once('connect', () => (this.connectedAt = Date.now()));
    this.timer = setTimeout(() => this.fail(new Error('Opening handshake has timed out')), options.handshakeTimeout);
    const headers = Object.entries(options.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
    this.socket.write(
      `GET ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${KEY}\r\n${headers}\r\n`,
    );
    this.socket.on('data', (chunk: Buffer) => (this.head ? this.onHead(chunk) : this.onFrames(chunk)));
    let failed = false;
    this.socket.on('error', (err) => {
      failed = true;
      this.emit('error', err);
    });
    this.socket.on('close', () => {
      clearTimeout(this.timer);
      if (this.readyState === CLOSED) return;
      // Ended by the server before its answer (a panel stopping): what ws reports as "socket hang up", ECONNRESET.
      if (this.readyState === CONNECTING && !failed) this.emit('error', Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
      this.readyState = CLOSED;
      this.emit('close', this.closeCode, Buffer.from(this.closeReason));
    });
  }

  /** A text frame, masked (as a client must) with the zero key. */
  send(text: string): void {
    if (this.readyState !== OPEN) return;
    const payload = Buffer.from(text);
    const n = payload.length;
    const header = n < 126 ? Buffer.from([0x81, 0x80 | n]) : n < 65_536 ? Buffer.from([0x81, 0x80 | 126, n >> 8, n & 0xff]) : frame64(n);
    this.socket.write(Buffer.concat([header, MASK, payload]));
  }

  /** Drops the connection at once (no close handshake), like ws's terminate(). */
  terminate(): void {
    this.socket.destroy();
  }

  private fail(err: Error): void {
    if (this.readyState === CLOSED) return;
    this.socket.emit('error', err);
    this.socket.destroy();
  }

  private onHead(chunk: Buffer): void {
    const head = Buffer.concat([this.head!, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) {
      this.head = head;
      return;
    }
    this.head = null;
    clearTimeout(this.timer);
    const lines = head.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number(lines[0]!.split(' ')[1]);
    if (status !== 101) {
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
      }
      this.readyState = CLOSED;
      // (request, response) as ws gives them; nothing of the response is left to read.
      this.emit('unexpected-response', null, { statusCode: status, headers, resume: () => {} });
      this.socket.destroy();
      this.emit('close', 1006, Buffer.alloc(0));
      return;
    }
    this.readyState = OPEN;
    this.emit('open');
    if (head.length > end + 4) this.onFrames(head.subarray(end + 4));
  }

  private onFrames(chunk: Buffer): void {
    let buf = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
    for (;;) {
      if (buf.length < 2) break;
      const fin = (buf[0]! & 0x80) !== 0;
      const opcode = buf[0]! & 0x0f;
      let len = buf[1]! & 0x7f;
      let at = 2;
      if (len === 126) {
        if (buf.length < 4) break;
        len = buf.readUInt16BE(2);
        at = 4;
      } else if (len === 127) {
        if (buf.length < 10) break;
        len = Number(buf.readBigUInt64BE(2));
        at = 10;
      }
      if (buf.length < at + len) break;
      const payload = buf.subarray(at, at + len);
      buf = buf.subarray(at + len);
      this.onFrame(fin, opcode, payload);
    }
    this.buffered = buf.length ? Buffer.from(buf) : Buffer.alloc(0);
  }

  private onFrame(fin: boolean, opcode: number, payload: Buffer): void {
    if (opcode === 0x1 || opcode === 0x0) {
      this.fragments.push(payload);
      if (!fin) return;
      const whole = this.fragments.length === 1 ? payload : Buffer.concat(this.fragments);
      this.fragments = [];
      this.emit('message', whole);
    } else if (opcode === 0x8) {
      this.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
      this.closeReason = payload.subarray(2).toString();
      if (this.readyState !== OPEN) return;
      this.readyState = CLOSING;
      // Answer the close (echoing the code) and let the server end the connection.
      const echo = payload.subarray(0, 2);
      this.socket.write(Buffer.concat([Buffer.from([0x88, 0x80 | echo.length]), MASK, echo]));
      this.socket.end();
    } else if (opcode === 0x9) {
      this.socket.write(Buffer.concat([Buffer.from([0x8a, 0x80 | payload.length]), MASK, payload]));
    }
  }
}

function frame64(n: number): Buffer {
  const b = Buffer.alloc(10);
  b[0] = 0x81;
  b[1] = 0x80 | 127;
  b.writeBigUInt64BE(BigInt(n), 2);
  return b;
}
