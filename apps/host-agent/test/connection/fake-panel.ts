import http from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { DEFAULT_TIMING, decode, encode, type AgentMessage, type PanelMessage, type Timing } from '@tether/protocol';
import { Inbox } from '@tether/testkit';
import { pino } from 'pino';
import { PanelConnection, type PanelConnectionOptions } from '../../src/connection/panel-connection.js';
import { DisabledRouting, UnavailableWorkloads } from '../../src/null-controllers.js';

// A scripted panel for agent connection tests: real HTTP upgrade and real
// WebSocket frames; each test decides what the "panel" answers.

export interface PanelConn {
  socket: WebSocket;
  received: AgentMessage[];
  openedAt: number;
  closedAt: number | null;
  send(message: PanelMessage): void;
  welcome(timing?: Partial<Timing>): void;
  waitFor<T extends AgentMessage>(predicate: (m: AgentMessage) => boolean, timeoutMs?: number): Promise<T>;
}

export class FakePanel {
  readonly connections: PanelConn[] = [];
  /** Answer the upgrade with this HTTP status instead (e.g. 401). */
  refuseWith: number | null = null;
  /** The refusal's JSON body (the panel's `{ error: { code, message } }`); null: none. */
  refuseBody: unknown = null;
  /** Sent as Retry-After (seconds) with a refusal. */
  retryAfterS: number | null = null;
  /** Send welcome automatically on hello. */
  autoWelcome: Partial<Timing> | null = {};
  /**
   * The hello versions this panel takes; any other gets UNSUPPORTED_PROTOCOL_VERSION and a close with
   * `closeCode` (4008 today; a version-1 panel closed with 4004), or the close alone when `withError` is false.
   */
  versions: { min: number; max: number; closeCode: number; withError: boolean } = { min: 1, max: 1, closeCode: 4008, withError: true };
  private readonly server = http.createServer();
  private readonly wss = new WebSocketServer({ noServer: true });

  async start(): Promise<string> {
    this.server.on('upgrade', (req, socket, head) => {
      if (this.refuseWith) {
        const retryAfter = this.retryAfterS === null ? '' : `retry-after: ${this.retryAfterS}\r\n`;
        const body = this.refuseBody === null ? '' : JSON.stringify(this.refuseBody);
        const type = body ? 'content-type: application/json\r\n' : '';
        socket.end(`HTTP/1.1 ${this.refuseWith} Refused\r\nconnection: close\r\n${retryAfter}${type}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws));
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  private accept(socket: WebSocket): void {
    const inbox = new Inbox<AgentMessage>();
    const conn: PanelConn = {
      socket,
      received: inbox.items,
      openedAt: Date.now(),
      closedAt: null,
      send: (m) => socket.send(encode(m)),
      welcome: (timing = {}) =>
        conn.send({
          type: 'welcome',
          id: `w${this.connections.length}`,
          ref: conn.received[0]?.id ?? 'x',
          sessionId: `ses_${this.connections.length}`,
          nodeId: 'node_1',
          timing: { ...DEFAULT_TIMING, ...timing },
        }),
      waitFor: (predicate, timeoutMs = 5_000) =>
        inbox.waitFor(predicate, timeoutMs, () => `agent sent no matching frame (got ${conn.received.map((m) => m.type).join(', ')})`),
    };
    this.connections.push(conn);
    socket.on('message', (data, isBinary) => {
      // Any version decodes here: refusing one is this panel's scripted choice below.
      const result = decode(data, { binary: isBinary, protocolVersions: { min: 0, max: Number.MAX_SAFE_INTEGER } });
      if (!result.ok) throw new Error(`agent sent an invalid frame: ${result.error.message}`);
      const message = result.message as AgentMessage;
      inbox.push(message);
      if (message.type === 'hello' && (message.protocolVersion < this.versions.min || message.protocolVersion > this.versions.max)) {
        const text = `protocol version ${message.protocolVersion} is not supported`;
        if (this.versions.withError) conn.send({ type: 'error', id: 'e1', ref: message.id, code: 'UNSUPPORTED_PROTOCOL_VERSION', message: text });
        socket.close(this.versions.closeCode, text);
        return;
      }
      if (message.type === 'hello' && this.autoWelcome) conn.welcome(this.autoWelcome);
    });
    socket.on('close', () => {
      conn.closedAt = Date.now();
      inbox.notify();
    });
  }

  async waitForConnection(n: number, timeoutMs = 5_000): Promise<PanelConn> {
    const deadline = Date.now() + timeoutMs;
    while (this.connections.length < n) {
      if (Date.now() > deadline) throw new Error(`only ${this.connections.length} connections, wanted ${n}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    return this.connections[n - 1]!;
  }

  async stop(): Promise<void> {
    for (const c of this.connections) c.socket.terminate();
    this.wss.close();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/**
 * A PanelConnection to a fake panel with the identity every connection test uses (node edge-1, a fixed token,
 * no runtime, no proxy, silent logs); a test gives what it is about (reconnect timing, events, versions).
 */
export function testConnection(panelUrl: string, options: Pick<PanelConnectionOptions, 'reconnect'> & Partial<PanelConnectionOptions>): PanelConnection {
  return new PanelConnection({
    panelUrl,
    token: 'tth_node_test_token_0123456789',
    nodeName: 'edge-1',
    agentVersion: 'test',
    workloads: new UnavailableWorkloads(),
    routing: new DisabledRouting(),
    logger: pino({ level: 'silent' }),
    ...options,
  });
}
