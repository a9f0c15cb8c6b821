import WebSocket from 'ws';
import { PROTOCOL_VERSION, createIdGenerator, decode, encode, type Message, type PanelMessage } from '@tether/protocol';
import { Inbox } from '@tether/testkit';

// A hand-driven agent for gateway tests: a real WebSocket client whose every
// reply is chosen by the test (answer pings or not, ACK or not, go silent).

export interface RawAgentOptions {
  url: string;
  token: string;
  node?: string;
  /** Reply to ping with pong (default true). */
  pong?: boolean;
  /** Which of deploy/workloads/routing.map/allocations/certificates to ACK (default all). */
  ack?: readonly ('deploy' | 'workloads' | 'routing.map' | 'allocations' | 'certificates')[];
  /** Heartbeat cadence; 0 = none (default 0). */
  heartbeatMs?: number;
  /** hello.capabilities (default: none, as an older agent). */
  capabilities?: string[];
  /** hello.privateAddress (routing.remote) and hello.challengePort (certificates.share). */
  privateAddress?: string;
  challengePort?: number;
  /** hello.fence (workload.fence). */
  fence?: { afterMs: number; stopTimeoutMs: number };
  /** The 127.0.0.x source address to connect from (edge tests tell agents from attackers by it). */
  localAddress?: string;
}

export interface Closed {
  code: number;
  reason: string;
  at: number;
}

export class RawAgent {
  private readonly inbox = new Inbox<PanelMessage>();
  readonly received: PanelMessage[] = this.inbox.items;
  readonly socket: WebSocket;
  closed: Closed | null = null;
  private readonly nextId = createIdGenerator('t');
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private seq = 0;
  silent = false;
  /**
   * `performance.now()` when this agent last handed a frame to its socket.
   * The panel's silence starts no earlier than this (it reads the frame
   * after), so a test bounds a teardown from here, not from goSilent(): on a
   * loaded machine the last heartbeat can leave well over one interval before.
   */
  lastSentAt = 0;
  /** The routing hash hello and heartbeats report as applied (tests set it to look in sync). */
  appliedHash: string | null = null;
  /** More of the routing status hello and heartbeats carry (e.g. route probes). */
  routingExtra: Record<string, unknown> = {};

  private constructor(private readonly options: RawAgentOptions) {
    const url = new URL(options.url);
    url.protocol = 'ws:';
    url.pathname = '/v1/agent/connect';
    this.socket = new WebSocket(url, {
      headers: { authorization: `Bearer ${options.token}` },
      ...(options.localAddress ? { localAddress: options.localAddress } : {}),
    });
    this.socket.on('message', (data, isBinary) => {
      const result = decode(data, { binary: isBinary });
      if (!result.ok) throw new Error(`panel sent an invalid frame: ${result.error.message}`);
      const message = result.message as PanelMessage;
      this.respond(message);
      this.inbox.push(message);
    });
    this.socket.on('close', (code, reason) => {
      clearInterval(this.heartbeatTimer);
      this.closed = { code, reason: reason.toString(), at: Date.now() };
      this.inbox.notify();
    });
    this.socket.on('error', () => undefined);
  }

  /** Connects and completes hello/welcome. */
  static async connect(options: RawAgentOptions): Promise<RawAgent> {
    const agent = new RawAgent(options);
    await new Promise<void>((resolve, reject) => {
      agent.socket.once('open', () => resolve());
      agent.socket.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
      agent.socket.once('error', reject);
    });
    agent.sendRaw(encode(agent.hello()));
    await agent.waitFor((m) => m.type === 'welcome');
    if (options.heartbeatMs) agent.heartbeatTimer = setInterval(() => agent.heartbeat(), options.heartbeatMs);
    return agent;
  }

  hello(): Message {
    return {
      type: 'hello',
      id: this.nextId(),
      node: this.options.node ?? 'raw',
      agentVersion: 'test',
      protocolVersion: PROTOCOL_VERSION,
      containers: [],
      runtime: { available: true, error: null },
      routing: { appliedHash: this.appliedHash, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null, ...this.routingExtra },
      ...(this.options.capabilities ? { capabilities: this.options.capabilities } : {}),
      ...(this.options.privateAddress ? { privateAddress: this.options.privateAddress } : {}),
      ...(this.options.challengePort ? { challengePort: this.options.challengePort } : {}),
      ...(this.options.fence ? { fence: this.options.fence } : {}),
    };
  }

  heartbeat(containers: Extract<Message, { type: 'heartbeat' }>['containers'] = []): void {
    if (this.silent) return;
    this.send({
      type: 'heartbeat',
      id: this.nextId(),
      seq: this.seq++,
      containers,
      runtime: { available: true, error: null },
      routing: { appliedHash: this.appliedHash, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null, ...this.routingExtra },
    });
  }

  /** Stops every reply and heartbeat while holding the socket open. */
  goSilent(): void {
    this.silent = true;
    clearInterval(this.heartbeatTimer);
  }

  send(message: Message): void {
    this.sendRaw(encode(message));
  }

  sendRaw(data: string | Buffer, binary = false): void {
    if (this.socket.readyState !== WebSocket.OPEN) return;
    this.socket.send(data, { binary });
    this.lastSentAt = performance.now();
  }

  get welcome(): Extract<PanelMessage, { type: 'welcome' }> {
    return this.received.find((m) => m.type === 'welcome') as Extract<PanelMessage, { type: 'welcome' }>;
  }

  private respond(message: PanelMessage): void {
    if (this.silent) return;
    if (message.type === 'ping' && this.options.pong !== false) this.send({ type: 'pong', id: this.nextId(), ref: message.id });
    const acked = this.options.ack ?? ['deploy', 'workloads', 'routing.map', 'allocations', 'certificates'];
    if ((message.type === 'deploy' || message.type === 'workloads' || message.type === 'routing.map' || message.type === 'allocations' || message.type === 'certificates') && acked.includes(message.type)) {
      this.send({ type: 'ack', id: this.nextId(), ref: message.id });
    }
  }

  /** Resolves with the first received message (past or future) matching `predicate`. */
  waitFor<T extends PanelMessage>(predicate: (m: PanelMessage) => boolean, timeoutMs = 5_000): Promise<T> {
    return this.inbox.waitFor<T>(predicate, timeoutMs, () => `no matching message; got ${this.received.map((m) => m.type).join(', ')}`);
  }

  waitClosed(timeoutMs = 5_000): Promise<Closed> {
    return this.inbox.until(() => this.closed, timeoutMs, () => 'socket still open');
  }

  close(): void {
    clearInterval(this.heartbeatTimer);
    this.socket.terminate();
  }
}
