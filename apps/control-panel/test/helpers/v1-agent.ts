import WebSocket from 'ws';
import { Inbox, V1_EXAMPLES, V1_MAX_STATE_FRAME_BYTES, decodeV1, encodeV1, type V1Frame } from '@tether/testkit';

// An agent of the first release (protocol version 1) built on its frozen
// schemas (@tether/testkit, protocol-v1): it says what a v1 agent said and
// nothing more, answers as a v1 agent did (pong, an ACK at once for deploy,
// workloads and routing.map, then deploy.result and routing.applied), and
// checks every panel frame against v1's schemas with every object closed, so
// a field or message v1 did not know shows up in `violations`.

export interface V1AgentOptions {
  url: string;
  token: string;
  node: string;
  heartbeatMs: number;
  /** What hello names (default 1); anything else is how a too-old or too-new agent looks. */
  protocolVersion?: number;
}

export class V1Agent {
  private readonly inbox = new Inbox<V1Frame>();
  readonly received = this.inbox.items;
  /** Panel frames a strict v1 agent would have refused, with v1's code. */
  readonly violations: string[] = [];
  closed: { code: number; reason: string } | null = null;
  readonly socket: WebSocket;
  private nextId = 0;
  private seq = 0;
  private heartbeats: NodeJS.Timeout | undefined;
  private readonly routing = { appliedHash: null as string | null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null };

  constructor(private readonly options: V1AgentOptions) {
    const url = new URL(options.url);
    url.protocol = 'ws:';
    url.pathname = '/v1/agent/connect';
    this.socket = new WebSocket(url, { headers: { authorization: `Bearer ${options.token}` }, maxPayload: V1_MAX_STATE_FRAME_BYTES });
    this.socket.on('open', () => this.send({ ...V1_EXAMPLES.hello!, id: this.id(), node: options.node, agentVersion: 'v1-frozen', protocolVersion: options.protocolVersion ?? 1, containers: [], routing: this.routing }));
    this.socket.on('message', (data) => this.onFrame(data as Buffer));
    this.socket.on('close', (code, reason) => {
      clearInterval(this.heartbeats);
      this.closed = { code, reason: reason.toString() };
      this.inbox.notify();
    });
    this.socket.on('error', () => undefined);
  }

  private id(): string {
    return `v1-${++this.nextId}`;
  }

  send(frame: V1Frame | (Record<string, unknown> & { type: string })): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(encodeV1(frame));
  }

  private onFrame(data: Buffer): void {
    const result = decodeV1(data, { closedWorld: true, maxBytes: V1_MAX_STATE_FRAME_BYTES });
    if (!result.ok) {
      this.violations.push(`${result.code}: ${result.message}`);
      return;
    }
    const m = result.message;
    this.inbox.push(m);
    switch (m.type) {
      case 'welcome':
        this.heartbeats = setInterval(() => this.heartbeat(), this.options.heartbeatMs);
        break;
      case 'ping':
        this.send({ type: 'pong', id: this.id(), ref: m.id });
        break;
      case 'workloads':
        this.send({ type: 'ack', id: this.id(), ref: m.id });
        break;
      case 'deploy': {
        this.send({ type: 'ack', id: this.id(), ref: m.id });
        const deploymentId = (m.workload as { deploymentId: string }).deploymentId;
        this.send({ type: 'deploy.result', id: this.id(), deploymentId, status: 'running', reason: 'started by the v1 agent', code: null });
        break;
      }
      case 'routing.map':
        this.send({ type: 'ack', id: this.id(), ref: m.id });
        this.routing.appliedHash = m.hash as string;
        this.send({ type: 'routing.applied', id: this.id(), ref: m.id, hash: m.hash, changed: true, reloaded: true, error: null, routing: { ...this.routing } });
        break;
      case 'error':
      case 'ack':
        break;
      default:
        // v1 answered a valid frame it did not take from the panel with UNEXPECTED_MESSAGE.
        this.violations.push(`UNEXPECTED_MESSAGE: ${m.type}`);
    }
  }

  heartbeat(): void {
    this.send({ type: 'heartbeat', id: this.id(), seq: this.seq++, containers: [], runtime: { available: true, error: null }, routing: { ...this.routing } });
  }

  waitFor(predicate: (m: V1Frame) => boolean, timeoutMs = 5_000): Promise<V1Frame> {
    return this.inbox.waitFor(predicate, timeoutMs, () => `no matching frame; got ${this.received.map((m) => m.type).join(', ')}`);
  }

  waitClosed(timeoutMs = 5_000): Promise<{ code: number; reason: string }> {
    return this.inbox.until(() => this.closed, timeoutMs, () => 'still open');
  }

  close(): void {
    clearInterval(this.heartbeats);
    this.socket.terminate();
  }
}
