import { EventEmitter } from 'node:events';
import type { Logger } from '@tether/common';
import WebSocket, { type RawData } from 'ws';
import { Backoff, Deadline, type DeadlineClock } from '@tether/common';
import {
  CLOSE_CODES,
  MAX_STATE_FRAME_BYTES,
  TERMINAL_CLOSE_CODES,
  TIMING_DEFAULTS,
  createIdGenerator,
  decode,
  encode,
  parseRetryHint,
  type AgentMessage,
  type AllocationsDrained,
  type DeployDrained,
  type PanelMessage,
  type ProtocolRange,
  type Timing,
} from '@tether/protocol';
import type { DeployOutcome, DrainReport, PendingEvents, RoutingController, WorkloadController } from '../controllers.js';
import type { LogStreams } from '../logs/index.js';
import { ProtocolVersions, fenceAnnounced, helloFrame, resultFrame } from './handshake.js';
import { PanelTargets, agentConnectUrl } from './panel-targets.js';
import { PanelFence } from './panel-fence.js';
import { PanelSession, sessionParts, type SessionParts, type Welcome } from './panel-session.js';
import { unexpected } from './frame-router.js';
import { refusedUpgrade } from './refusal.js';

export { agentConnectUrl } from './panel-targets.js';

// The agent's one session with the panel. Every read runs under a read-idle
// deadline (90 s by default: three missed panel pings); silence past it means
// the connection is dead whatever TCP says, so the socket is destroyed and the
// agent reconnects with exponential backoff and full jitter, forever, with no
// human and no restart. The connection keeps the socket, the handshake and the
// backoff; what lives for one session is a PanelSession, made at welcome and
// dropped at close (panel-session.ts: its frames, heartbeat and terms). Beside
// it: which panel to dial (panel-targets.ts), what hello says (handshake.ts),
// results held for the next session (deploy-results.ts) and proxy events
// (event-sender.ts).

export interface PanelConnectionOptions {
  /** One panel, or several sharing a database: each connect takes the next of them in a shuffled order. */
  panelUrl: string | readonly string[];
  token: string;
  nodeName: string;
  agentVersion: string;
  workloads: WorkloadController;
  routing: RoutingController;
  /** Reload and canary events to send in `proxy.events` when the panel speaks it. */
  events?: PendingEvents;
  /** Container logs over the session (capability `logs`); absent: not announced. */
  logs?: LogStreams;
  reconnect: { minMs: number; maxMs: number; healthySessionMs: number; connectTimeoutMs: number };
  /** The versions hello may say (TETHER_PROTOCOL_VERSION_MAX); default: every version this build speaks. */
  protocolVersions?: ProtocolRange;
  overrides?: { agentIdleTimeoutMs?: number; heartbeatIntervalMs?: number };
  logger: Logger;
  random?: () => number;
  /** Where the read-idle deadline reads time; the system's monotonic clock unless a test injects one. */
  clock?: DeadlineClock;
  /**
   * Self-fencing (capability workload.fence, announced when the workloads can fence): TETHER_FENCE_AFTER_MS and the
   * stop grace hello names with it (TETHER_STOP_TIMEOUT_MS); absent: no fence.
   */
  fence?: { afterMs: number; stopTimeoutMs: number };
}

export type ConnectionState = 'connecting' | 'handshaking' | 'ready' | 'waiting' | 'stopped';

export interface ConnectionEvents {
  ready: [{ sessionId: string; timing: Timing; protocolVersion: number }];
  closed: [{ code: number; reason: string; sessionId: string | null; retryInMs: number }];
  /** The panel said this node is decommissioned or lost (close 4005, or a 403 AGENT_DECOMMISSIONED): run nothing. */
  decommissioned: [{ how: string }];
}

export class PanelConnection extends EventEmitter<ConnectionEvents> {
  private socket: WebSocket | undefined;
  private state_: ConnectionState = 'waiting';
  /** The session the current socket's welcome opened; null before welcome and between sessions. */
  private session: PanelSession | null = null;
  /** The read-idle deadline: runs from the last valid frame from the panel, never fires early. */
  private idle: Deadline | undefined;
  private idleTimeoutMs: number;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly backoff: Backoff;
  private readonly nextId = createIdGenerator('a');
  private terminal = false;
  /** What outlives a session: the parts, results and events waiting for the next one, the fence. */
  private readonly parts: SessionParts;
  private readonly targets: PanelTargets;
  /**
   * The last connect was refused at once (ECONNREFUSED, ECONNRESET, 503: a panel down, stopping or shedding)
   * rather than left to time out: a hinted backoff widens only for a timeout, the sign of a panel past its pace.
   */
  private refused = false;
  /** The version each connection's hello says (stepping down when a panel refused a higher one). */
  private readonly versions: ProtocolVersions;
  /** Capability workload.fence: stops fenced containers when no panel is heard (panel-fence.ts); null: no fence. */
  private readonly fence: PanelFence | null;
  /** When the current socket was made, on the fence's clock. */
  private socketOpenedAt = 0;

  constructor(private readonly options: PanelConnectionOptions) {
    super();
    this.backoff = new Backoff({ initialMs: options.reconnect.minMs, maxMs: options.reconnect.maxMs, random: options.random });
    this.idleTimeoutMs = options.overrides?.agentIdleTimeoutMs ?? TIMING_DEFAULTS.agentIdleTimeoutMs;
    this.versions = new ProtocolVersions(options.protocolVersions);
    this.targets = new PanelTargets(options.panelUrl, options.random);
    const setFenced = options.workloads.setFenced?.bind(options.workloads);
    this.fence = fenceAnnounced(options) && setFenced ? new PanelFence({ afterMs: options.fence!.afterMs, setFenced, logger: options.logger, ...(options.clock ? { clock: options.clock } : {}) }) : null;
    this.parts = sessionParts(options, this.nextId, this.fence, (deploymentId, outcome) => this.reportResult(deploymentId, outcome));
    options.events?.onRecorded(() => this.session?.sendEvents());
    options.workloads.onAllocationStatus?.(() => this.session?.sendAllocationStatus());
  }

  get state(): ConnectionState {
    return this.state_;
  }

  /** The session the panel's welcome opened; null between sessions. */
  get currentSessionId(): string | null {
    return this.session?.id ?? null;
  }

  start(): void {
    if (this.state_ === 'stopped') throw new Error('a stopped connection cannot start again');
    this.fence?.start();
    this.connect();
  }

  async stop(): Promise<void> {
    this.state_ = 'stopped';
    clearTimeout(this.retryTimer);
    this.idle?.cancel();
    this.fence?.stop();
    await this.session?.close();
    const socket = this.socket;
    if (socket && socket.readyState !== WebSocket.CLOSED) {
      const closed = new Promise((resolve) => socket.once('close', resolve));
      socket.close(1001, 'agent stopping');
      const kill = setTimeout(() => socket.terminate(), 1_000);
      await closed;
      clearTimeout(kill);
    }
  }

  private connect(): void {
    if (this.state_ === 'stopped') return;
    this.state_ = 'connecting';
    this.terminal = false;
    this.versions.begin();
    this.refused = false;
    const log = this.options.logger;
    const panelUrl = this.targets.next();
    log.debug({ panel: panelUrl }, 'connecting');
    const socket = new WebSocket(agentConnectUrl(panelUrl), {
      headers: { authorization: `Bearer ${this.options.token}` },
      handshakeTimeout: this.options.reconnect.connectTimeoutMs,
      maxPayload: MAX_STATE_FRAME_BYTES,
      perMessageDeflate: false,
    });
    this.socket = socket;
    this.socketOpenedAt = this.fence?.now() ?? 0;

    socket.on('unexpected-response', (_req, res) => {
      ({ terminal: this.terminal, refused: this.refused } = refusedUpgrade(res, socket, { logger: log, backoff: this.backoff, decommissioned: (how) => this.emit('decommissioned', { how }) }));
    });
    socket.on('open', () => {
      this.state_ = 'handshaking';
      // Until welcome, the connect timeout bounds the wait.
      this.armIdle(this.options.reconnect.connectTimeoutMs);
      void this.sendHello(socket);
    });
    socket.on('message', (data: RawData, isBinary: boolean) => this.onFrame(socket, data, isBinary));
    socket.on('error', (err: Error & { code?: string }) => {
      if (err.code === 'ECONNREFUSED' || err.code === 'ECONNRESET') this.refused = true;
      log.warn({ err }, 'panel socket error');
    });
    socket.on('close', (code, reason) => this.onClose(socket, code, reason.toString('utf8')));
  }

  private async sendHello(socket: WebSocket): Promise<void> {
    const hello = await helloFrame({ ...this.options, fenced: this.fence !== null }, this.nextId(), this.versions.current);
    this.sendOn(socket, hello);
  }

  private armIdle(timeoutMs: number): void {
    this.idle?.cancel();
    this.idle = new Deadline({ timeoutMs, onExpire: (silentMs) => this.onIdle(timeoutMs, silentMs), clock: this.options.clock });
  }

  private onIdle(timeoutMs: number, silentMs: number): void {
    const socket = this.socket;
    if (!socket) return;
    const silentForMs = Math.floor(silentMs);
    this.options.logger.warn({ timeoutMs, silentForMs, sessionId: this.currentSessionId }, 'panel silent past the read-idle deadline; dropping the connection');
    // A half-open peer never completes a close handshake: destroy the socket now.
    socket.terminate();
  }

  private onFrame(socket: WebSocket, data: RawData, isBinary: boolean): void {
    if (socket !== this.socket) return;
    // Whole-host state (routing.map, workloads) may exceed 1 MiB; the panel is the only peer here.
    const result = decode(data, { binary: isBinary, maxBytes: MAX_STATE_FRAME_BYTES });
    if (!result.ok) {
      this.options.logger.warn({ code: result.error.code, message: result.error.message }, 'invalid frame from panel');
      this.sendOn(socket, { type: 'error', id: this.nextId(), ref: result.error.ref, code: result.error.code, message: result.error.message });
      return;
    }
    if (this.fence && !this.fence.heard(this.socketOpenedAt)) {
      // Fenced: what this session says now may be stale (its panel may have lost the node meanwhile); a fresh one decides.
      this.options.logger.warn({ sessionId: this.currentSessionId }, 'a frame on a session older than the fence: reconnecting for a fresh set');
      socket.terminate();
      return;
    }
    this.idle?.touch();
    const message = result.message as PanelMessage;
    if (message.type === 'welcome') return this.onWelcome(socket, { sessionId: message.sessionId, timing: message.timing, capabilities: message.capabilities ?? [] });
    if (this.session?.handle(message)) return;
    if (!this.session && message.type === 'error') return this.onHandshakeError(message);
    this.sendOn(socket, unexpected(message, this.nextId()));
  }

  /** Before welcome the only frame the agent sent is hello: an error names its version (a v1 panel then closes with 4004). */
  private onHandshakeError(message: Extract<PanelMessage, { type: 'error' }>): void {
    if (this.state_ === 'handshaking') this.versions.error(message);
    this.options.logger.warn({ code: message.code, ref: message.ref, message: message.message }, 'panel rejected a frame');
  }

  /** A session begins: everything that lives for it is made now (panel-session.ts), and dropped at close. */
  private onWelcome(socket: WebSocket, welcome: Welcome): void {
    void this.session?.close();
    const session = (this.session = new PanelSession(this.parts, socket, welcome));
    const { timing, sessionId } = welcome;
    this.state_ = 'ready';
    this.idleTimeoutMs = this.options.overrides?.agentIdleTimeoutMs ?? timing.agentIdleTimeoutMs;
    this.armIdle(this.idleTimeoutMs);
    if (this.fence && this.options.fence!.afterMs <= timing.pingIntervalMs) {
      this.options.logger.warn({ fenceAfterMs: this.options.fence!.afterMs, pingIntervalMs: timing.pingIntervalMs }, 'TETHER_FENCE_AFTER_MS is not above the panel ping interval: a quiet healthy session may fence');
    }
    session.open(timing);
    this.options.logger.info({ sessionId, heartbeatMs: session.heartbeatMs, idleTimeoutMs: this.idleTimeoutMs, protocolVersion: this.versions.current }, 'session ready');
    this.emit('ready', { sessionId, timing, protocolVersion: this.versions.current });
  }

  /** Sends a deployment's outcome now, or on the next session if there is none. */
  reportResult(deploymentId: string, outcome: DeployOutcome): void {
    const result = resultFrame(this.nextId(), deploymentId, outcome);
    if (this.session?.send(result)) return;
    this.parts.results.hold(result);
  }

  /** Sends a drain's end (`deploy.drained`, or `allocations.drained` for an allocation rollout's) now, or on the next session if there is none. */
  reportDrained(report: DrainReport): void {
    const { allocationIds, ...drain } = report;
    const message: DeployDrained | AllocationsDrained = allocationIds
      ? { type: 'allocations.drained', id: this.nextId(), ...drain, allocationIds }
      : { type: 'deploy.drained', id: this.nextId(), ...drain };
    if (this.session?.sendDrained(message)) return;
    this.parts.results.hold(message);
  }

  private sendOn(socket: WebSocket, message: AgentMessage): boolean {
    if (socket.readyState !== WebSocket.OPEN) return false;
    socket.send(encode(message));
    return true;
  }

  private onClose(socket: WebSocket, code: number, reason: string): void {
    if (socket !== this.socket) return;
    this.idle?.cancel();
    const session = this.session;
    this.session = null;
    void session?.close();
    const sessionId = session?.id ?? null;
    const lasted = session ? Date.now() - session.startedAt : 0;
    this.socket = undefined;
    if (this.state_ === 'stopped') return;
    if (sessionId && lasted >= this.options.reconnect.healthySessionMs) this.backoff.reset();
    const { refused: versionRefused, lower } = this.versions.closed(code, sessionId !== null);
    // A planned panel stop says when to come back (docs/protocol.md, "Retry hint"): spread within its window, not doubling.
    const hintMs = code === CLOSE_CODES.SERVICE_RESTART ? parseRetryHint(reason) : null;
    if (hintMs !== null) this.backoff.hint(hintMs);
    // Refused at the oldest version it speaks, the agent cannot help it: an operator upgrades or unpins a side.
    const terminal = this.terminal || TERMINAL_CLOSE_CODES.has(code) || (versionRefused && lower === null);
    if (code === CLOSE_CODES.DECOMMISSIONED) this.emit('decommissioned', { how: `session closed: ${code} ${reason}` });
    const retryInMs = lower !== null ? 0 : terminal ? this.options.reconnect.maxMs : this.backoff.next(this.refused);
    this.state_ = 'waiting';
    this.options.logger.warn(
      { code, reason, sessionId, retryInMs, hinted: this.backoff.isHinted, ...(versionRefused ? { refusedVersion: this.versions.current, nextVersion: lower } : {}) },
      'disconnected from panel',
    );
    this.emit('closed', { code, reason, sessionId, retryInMs });
    this.retryTimer = setTimeout(() => this.connect(), retryInMs);
  }
}
