// Child process of bench/panels.ts: a slice of simulated agents on one
// 127.0.0.x source address, each given every panel's URL like the real agent
// with a comma-separated TETHER_PANEL_URL: each connect takes the next panel
// of a shuffled round, with the agent's own jittered backoff between attempts
// (@tether/common Backoff, 0.5 s doubling to 30 s, reset after a 10 s
// session, 10 s connect timeout). Per session: hello with the containers it
// runs, heartbeats at welcome's cadence (or the bench's override, as the
// agent's TETHER_HEARTBEAT_INTERVAL_MS), pongs, ACK before work, and
// `deploy.result` running; a deploy or a workloads push makes its containers
// "running", so status has something to lie about when a panel dies.
import WebSocket from 'ws';
import { Backoff } from '@tether/common';
import { PROTOCOL_VERSION, createIdGenerator, decode, encode, type ContainerState, type Message, type Workload } from '@tether/protocol';

export type GeneratorCommand =
  | { type: 'start'; urls: string[]; tokens: string[]; base: number; localAddress: string; spreadMs: number }
  /** Heartbeat cadence override (ms), applied at once with a random phase; 0 = welcome's. */
  | { type: 'heartbeat'; ms: number }
  /** From now on count who loses a session and when it is back; `hold`: these global indices stay away after losing it. */
  | { type: 'mark'; hold: number[] }
  | { type: 'report' }
  | { type: 'stop' };

export interface GeneratorReport {
  type: 'report';
  agents: number;
  /** Agents with welcome, workloads and routing map on their current session, per panel URL index. */
  completeByPanel: number[];
  /** Since the last mark: agents that lost their session, and when (epoch ms) each was complete again elsewhere. */
  lost: number;
  backAt: number[];
  /** Deploys received since the last report: [deploymentId, epoch ms the ACK was sent]. */
  acks: [string, number][];
  errors: Record<string, number>;
  closes: Record<string, number>;
}

const RECONNECT = { initialMs: 500, maxMs: 30_000 };
const HEALTHY_SESSION_MS = 10_000;
const CONNECT_TIMEOUT_MS = 10_000;
const routing = { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null };
const runtime = { available: true, error: null };
const nextId = createIdGenerator('p');

let config: Extract<GeneratorCommand, { type: 'start' }>;
let heartbeatOverrideMs = 0;
let markedAt = 0;
let held = new Set<number>();
let acks: [string, number][] = [];
const errors = new Map<string, number>();
const closes = new Map<string, number>();
const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);

function running(w: Workload): ContainerState {
  return { containerId: `c-${w.deploymentId}`, serviceId: w.serviceId, deploymentId: w.deploymentId, name: w.serviceName, state: 'running', exitCode: null, health: 'none', restartCount: 0, since: new Date().toISOString() };
}

class SimAgent {
  private socket: WebSocket | undefined;
  private readonly backoff = new Backoff(RECONNECT);
  private untried: number[] = [];
  private panel = -1;
  private welcomedAt = 0;
  private heartbeatMs = 5_000;
  private beat: NodeJS.Timeout | undefined;
  private seq = 0;
  private got = { welcome: false, workloads: false, map: false };
  private containers = new Map<string, ContainerState>();
  lostAt = 0;
  backAt = 0;

  constructor(readonly index: number) {}

  get completeOn(): number {
    return this.got.welcome && this.got.workloads && this.got.map ? this.panel : -1;
  }

  /** The next panel of a shuffled round, as the host agent picks it (panel-connection.ts). */
  private nextPanel(): number {
    if (this.untried.length === 0) {
      const order = config.urls.map((_, i) => i);
      for (let i = order.length - 1; i > 0; i--) {
        const j = Math.floor(Math.random() * (i + 1));
        [order[i], order[j]] = [order[j]!, order[i]!];
      }
      this.untried = order;
    }
    return this.untried.shift()!;
  }

  connect(): void {
    this.panel = this.nextPanel();
    const socket = new WebSocket(`${config.urls[this.panel]!.replace(/^http/, 'ws')}/v1/agent/connect`, {
      headers: { authorization: `Bearer ${config.tokens[this.index]}` },
      perMessageDeflate: false,
      localAddress: config.localAddress,
      handshakeTimeout: CONNECT_TIMEOUT_MS,
    });
    this.socket = socket;
    socket.on('open', () =>
      this.send({ type: 'hello', id: nextId(), node: `bench-${config.base + this.index}`, agentVersion: 'bench', protocolVersion: PROTOCOL_VERSION, containers: [...this.containers.values()], runtime, routing }),
    );
    socket.on('message', (data) => {
      const decoded = decode(data, { maxBytes: 16 * 1024 * 1024 });
      if (decoded.ok) this.onMessage(decoded.message);
    });
    // Keyed by panel too (panel-a is URL 0, as bench/panels-cluster.ts names them): a slow panel shows as itself.
    const panel = `panel-${String.fromCharCode(97 + this.panel)}`;
    socket.on('error', (err: Error & { code?: string }) => bump(errors, `${err.code ?? err.message} @${panel}`));
    socket.on('close', (code) => this.onClose(socket, code));
  }

  private onMessage(m: Message): void {
    if (m.type === 'welcome') {
      this.got.welcome = true;
      this.welcomedAt = Date.now();
      this.heartbeatMs = m.timing.heartbeatIntervalMs;
      this.schedule();
    } else if (m.type === 'ping') this.send({ type: 'pong', id: nextId(), ref: m.id });
    else if (m.type === 'deploy') {
      this.send({ type: 'ack', id: nextId(), ref: m.id });
      acks.push([m.workload.deploymentId, Date.now()]);
      this.containers.set(m.workload.serviceId, running(m.workload));
      this.send({ type: 'deploy.result', id: nextId(), deploymentId: m.workload.deploymentId, status: 'running', reason: 'started', code: null });
    } else if (m.type === 'workloads' || m.type === 'routing.map') {
      this.send({ type: 'ack', id: nextId(), ref: m.id });
      if (m.type === 'routing.map') this.got.map = true;
      else {
        this.got.workloads = true;
        this.containers = new Map(m.workloads.filter((w) => w.replicas > 0).map((w) => [w.serviceId, running(w)]));
      }
    }
    if (this.lostAt && !this.backAt && this.completeOn >= 0) this.backAt = Date.now();
  }

  /** (Re)arms the heartbeat with a random phase, at the override or welcome's cadence. */
  schedule(): void {
    clearTimeout(this.beat);
    if (!this.got.welcome) return;
    const every = heartbeatOverrideMs || this.heartbeatMs;
    const tick = () => {
      this.send({ type: 'heartbeat', id: nextId(), seq: this.seq++, containers: [...this.containers.values()], runtime, routing });
      this.beat = setTimeout(tick, every);
    };
    this.beat = setTimeout(tick, Math.random() * every);
  }

  private send(m: Message): void {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(encode(m));
  }

  private onClose(socket: WebSocket, code: number): void {
    if (this.socket !== socket) return;
    clearTimeout(this.beat);
    const lasted = this.got.welcome ? Date.now() - this.welcomedAt : 0;
    if (this.got.welcome) {
      bump(closes, String(code));
      if (markedAt && !this.lostAt) this.lostAt = Date.now();
    }
    this.got = { welcome: false, workloads: false, map: false };
    this.socket = undefined;
    if (lasted >= HEALTHY_SESSION_MS) this.backoff.reset();
    if (held.has(config.base + this.index)) return;
    setTimeout(() => this.connect(), this.backoff.next());
  }

  stop(): void {
    this.socket?.terminate();
  }
}

const agents: SimAgent[] = [];

function report(): GeneratorReport {
  const completeByPanel = config.urls.map(() => 0);
  for (const a of agents) if (a.completeOn >= 0) completeByPanel[a.completeOn]!++;
  const out: GeneratorReport = {
    type: 'report',
    agents: agents.length,
    completeByPanel,
    lost: agents.filter((a) => a.lostAt).length,
    backAt: agents.filter((a) => a.backAt).map((a) => a.backAt),
    acks,
    errors: Object.fromEntries(errors),
    closes: Object.fromEntries(closes),
  };
  acks = [];
  return out;
}

process.on('message', (command: GeneratorCommand) => {
  switch (command.type) {
    case 'start':
      config = command;
      for (let i = 0; i < command.tokens.length; i++) {
        const agent = new SimAgent(i);
        agents.push(agent);
        setTimeout(() => agent.connect(), Math.random() * command.spreadMs);
      }
      break;
    case 'heartbeat':
      heartbeatOverrideMs = command.ms;
      for (const a of agents) a.schedule();
      break;
    case 'mark':
      markedAt = Date.now();
      held = new Set(command.hold);
      for (const a of agents) a.lostAt = a.backAt = 0;
      errors.clear();
      closes.clear();
      break;
    case 'report':
      process.send?.(report());
      break;
    case 'stop':
      for (const a of agents) a.stop();
      process.exit(0);
  }
});
