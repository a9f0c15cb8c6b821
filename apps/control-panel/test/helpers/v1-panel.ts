import http from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { routingHash, type Route } from '@tether/protocol';
import { Inbox, V1_PROTOCOL_ERROR_CLOSE, decodeV1, encodeV1, type V1Frame } from '@tether/testkit';

// A panel of the first release (protocol version 1) on its frozen schemas
// (@tether/testkit, protocol-v1), as strict as that panel was: every agent
// frame goes through v1's decode (a hello of exactly version 1; unknown types
// refused), a refused version gets v1's error and close 4004, and a frame of a
// type v1 did not take from agents is UNEXPECTED_MESSAGE. Every refusal lands
// in `violations`. After hello it answers as v1 did: welcome (no
// capabilities), workloads, routing.map; then pings.

const V1_AGENT_TYPES = new Set(['heartbeat', 'pong', 'ack', 'deploy.result', 'routing.applied', 'error']);

export interface V1PanelSession {
  socket: WebSocket;
  hello: V1Frame | null;
  closed: boolean;
}

export class V1Panel {
  private readonly inbox = new Inbox<V1Frame>();
  /** Every valid agent frame, in order, over all connections. */
  readonly received = this.inbox.items;
  readonly violations: string[] = [];
  /** The protocolVersion of every hello, in order, accepted or not. */
  readonly hellos: number[] = [];
  readonly sessions: V1PanelSession[] = [];
  private readonly server = http.createServer();
  private readonly wss = new WebSocketServer({ noServer: true });
  private nextId = 0;
  private pings: NodeJS.Timeout | undefined;

  constructor(private readonly options: { pingIntervalMs: number; heartbeatIntervalMs: number }) {}

  async start(): Promise<string> {
    this.server.on('upgrade', (req, socket, head) => this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws)));
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.pings = setInterval(() => {
      for (const s of this.sessions) if (s.hello && !s.closed) this.send(s, { type: 'ping', id: this.id() });
    }, this.options.pingIntervalMs);
    return `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  private id(): string {
    return `p1-${++this.nextId}`;
  }

  send(session: V1PanelSession, frame: Record<string, unknown> & { type: string }): void {
    if (!session.closed) session.socket.send(encodeV1(frame));
  }

  get live(): V1PanelSession | undefined {
    return this.sessions.findLast((s) => s.hello && !s.closed);
  }

  private refuse(session: V1PanelSession, code: string, message: string, ref: string | null): void {
    this.violations.push(`${code}: ${message}`);
    this.send(session, { type: 'error', id: this.id(), ref, code, message });
  }

  private accept(socket: WebSocket): void {
    const session: V1PanelSession = { socket, hello: null, closed: false };
    this.sessions.push(session);
    socket.on('message', (data) => {
      const result = decodeV1(data as Buffer);
      if (!result.ok) {
        this.refuse(session, result.code, result.message, result.ref);
        if (result.code !== 'UNSUPPORTED_PROTOCOL_VERSION') return;
        this.hellos.push((JSON.parse(String(data)) as { protocolVersion: number }).protocolVersion);
        return void socket.close(V1_PROTOCOL_ERROR_CLOSE, result.message);
      }
      const m = result.message;
      if (!session.hello) {
        if (m.type !== 'hello') {
          this.refuse(session, 'UNEXPECTED_MESSAGE', `expected hello, got ${m.type}`, m.id);
          return void socket.close(V1_PROTOCOL_ERROR_CLOSE, 'first frame must be hello');
        }
        session.hello = m;
        this.hellos.push(m.protocolVersion as number);
        this.inbox.push(m);
        const t = this.options;
        const timing = { heartbeatIntervalMs: t.heartbeatIntervalMs, pingIntervalMs: t.pingIntervalMs, panelIdleTimeoutMs: 30_000, agentIdleTimeoutMs: 90_000, ackTimeoutMs: 10_000 };
        this.send(session, { type: 'welcome', id: this.id(), ref: m.id, sessionId: `ses_v1_${this.sessions.length}`, nodeId: 'node_v1', timing });
        this.send(session, { type: 'workloads', id: this.id(), workloads: [] });
        this.push(session, []);
        return;
      }
      if (!V1_AGENT_TYPES.has(m.type)) return this.refuse(session, 'UNEXPECTED_MESSAGE', `${m.type} is not accepted from an agent`, m.id);
      this.inbox.push(m);
    });
    socket.on('close', () => {
      session.closed = true;
      this.inbox.notify();
    });
  }

  /** Sends a routing.map (v1 hashed maps as today's routingHash does: v1-compat.test.ts checks); returns its id. */
  push(session: V1PanelSession, routes: Route[], version = 1): string {
    const id = this.id();
    this.send(session, { type: 'routing.map', id, version, hash: routingHash(routes), routes });
    return id;
  }

  deploy(session: V1PanelSession, workload: Record<string, unknown>): string {
    const id = this.id();
    this.send(session, { type: 'deploy', id, workload });
    return id;
  }

  waitFor(predicate: (m: V1Frame) => boolean, timeoutMs = 5_000): Promise<V1Frame> {
    return this.inbox.waitFor(predicate, timeoutMs, () => `no matching agent frame; got ${this.received.map((m) => m.type).join(', ')}`);
  }

  async stop(): Promise<void> {
    clearInterval(this.pings);
    for (const s of this.sessions) s.socket.terminate();
    this.wss.close();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
