import { EventEmitter } from 'node:events';
import type { Logger } from '@tether/common';
import WebSocket, { type RawData } from 'ws';
import { Backoff, createLoop, Deadline, errorMessage, type DeadlineClock, type Loop } from '@tether/common';
import {
  CAPABILITIES,
  CLOSE_CODES,
  DECOMMISSIONED_REFUSAL_CODE,
  DEFAULT_PROTOCOL_RANGE,
  FRAME_ERROR_CODES,
  MAX_STATE_FRAME_BYTES,
  TERMINAL_CLOSE_CODES,
  TIMING_DEFAULTS,
  createIdGenerator,
  decode,
  encode,
  versionBelow,
  parseRetryHint,
  type AgentMessage,
  type DeployDrained,
  type DeployResult,
  type PanelMessage,
  type ProtocolRange,
  type RoutingStatus,
  type Timing,
} from '@tether/protocol';
import type { DeployOutcome, DrainReport, PendingEvents, RoutingController, WorkloadController } from '../controllers.js';
import { AGENT_ERROR_CODES } from '../errors.js';
import type { LogStreams } from '../logs/index.js';
import { DeployResultQueue } from './deploy-results.js';
import { EventSender } from './event-sender.js';
import { CertificateReporter } from './certificate-reporter.js';
import { PanelFrameRouter } from './frame-router.js';
import { agentCapabilities, challengePort, fenceAnnounced, freeText, remoteRoutingAddress, routingStatus, runtimeStatus } from './handshake.js';
import { PanelTargets, agentConnectUrl } from './panel-targets.js';
import { PanelFence } from './panel-fence.js';
import { refusalCode } from './refusal.js';

export { agentConnectUrl } from './panel-targets.js';

// The agent's one session with the panel. Every read runs under a read-idle
// deadline (90 s by default: three missed panel pings); silence past it means
// the connection is dead whatever TCP says, so the socket is destroyed and the
// agent reconnects with exponential backoff and full jitter, forever, with no
// human and no restart. Beside it: which panel to dial (panel-targets.ts),
// what hello says (handshake.ts), where each frame goes (frame-router.ts, its
// handlers registered in routeFrames below), results held for the next
// session (deploy-results.ts) and proxy events (event-sender.ts).

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
  private sessionId: string | null = null;
  private sessionStartedAt = 0;
  /** The read-idle deadline: runs from the last valid frame from the panel, never fires early. */
  private idle: Deadline | undefined;
  private idleTimeoutMs: number;
  private retryTimer: NodeJS.Timeout | undefined;
  private heartbeat: Loop | undefined;
  private seq = 0;
  private readonly backoff: Backoff;
  private readonly nextId = createIdGenerator('a');
  private readonly results = new DeployResultQueue();
  private terminal = false;
  private readonly events: EventSender | null;
  /** certificates.share: what this node issues, reported to the panel. */
  private readonly certificates: CertificateReporter | null;
  private readonly targets: PanelTargets;
  private readonly router = new PanelFrameRouter();
  /**
   * The last connect was refused at once (ECONNREFUSED, ECONNRESET, 503: a panel down, stopping or shedding)
   * rather than left to time out: a hinted backoff widens only for a timeout, the sign of a panel past its pace.
   */
  private refused = false;
  /** This session speaks `logs` (both ends named it). */
  private logsAttached = false;
  /** The capabilities the current session's welcome confirmed. */
  private confirmed: readonly string[] = [];
  /** The inventory revision this session was last sent in `volumes.report`. */
  private volumesSent: number | null = null;
  /** The id of this session's last `allocations` frame (`allocations.status` names it); null before the first. */
  private allocationsRef: string | null = null;
  /** The version this connection's hello says, and the one the next says when a panel refused a higher one. */
  private protocolVersion: number;
  private stepDownTo: number | null = null;
  /** The panel answered this connection's hello with UNSUPPORTED_PROTOCOL_VERSION. */
  private versionRefused = false;
  /** Capability workload.fence: stops fenced containers when no panel is heard (panel-fence.ts); null: no fence. */
  private readonly fence: PanelFence | null;
  /** When the current socket was made, on the fence's clock. */
  private socketOpenedAt = 0;

  constructor(private readonly options: PanelConnectionOptions) {
    super();
    this.backoff = new Backoff({ initialMs: options.reconnect.minMs, maxMs: options.reconnect.maxMs, random: options.random });
    this.idleTimeoutMs = options.overrides?.agentIdleTimeoutMs ?? TIMING_DEFAULTS.agentIdleTimeoutMs;
    this.protocolVersion = this.versions.max;
    this.events = options.events ? new EventSender(options.events, this.nextId) : null;
    const sharing = options.routing.certificateSharing;
    this.certificates = sharing ? new CertificateReporter(sharing, this.nextId, options.logger) : null;
    this.targets = new PanelTargets(options.panelUrl, options.random);
    options.events?.onRecorded(() => this.sendEvents());
    options.workloads.onAllocationStatus?.(() => this.sendAllocationStatus());
    const setFenced = options.workloads.setFenced?.bind(options.workloads);
    this.fence = fenceAnnounced(options) && setFenced ? new PanelFence({ afterMs: options.fence!.afterMs, setFenced, logger: options.logger, ...(options.clock ? { clock: options.clock } : {}) }) : null;
    this.routeFrames();
  }

  private get versions(): ProtocolRange {
    return this.options.protocolVersions ?? DEFAULT_PROTOCOL_RANGE;
  }

  get state(): ConnectionState {
    return this.state_;
  }

  /** The session the panel's welcome opened; null between sessions. */
  get currentSessionId(): string | null {
    return this.sessionId;
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
    await this.heartbeat?.stop();
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
    // Every connection starts from the highest version, unless the last one was just refused for its version:
    // an upgraded panel is found without a restart, an old one costs one refused upgrade per reconnect.
    this.protocolVersion = this.stepDownTo ?? this.versions.max;
    this.stepDownTo = null;
    this.versionRefused = false;
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
      // 401 (unknown token) and 403 (decommissioned) need an operator: keep trying, but slowly.
      this.terminal = res.statusCode === 401 || res.statusCode === 403;
      // A busy or restarting panel names when to come back (docs/protocol.md, "Retry hint"): a window to spread
      // over, or, for an agent already on a hinted schedule, the next delay only (the schedule goes on after it).
      this.refused = res.statusCode === 503;
      const retryAfterS = res.statusCode === 503 ? Number(res.headers['retry-after']) : NaN;
      if (Number.isInteger(retryAfterS) && retryAfterS > 0) {
        if (this.backoff.isHinted) this.backoff.retryAfter(retryAfterS * 1_000);
        else this.backoff.hint(retryAfterS * 1_000);
      }
      if (res.statusCode !== 403) {
        log.error({ status: res.statusCode }, this.terminal ? 'panel refused this node token' : 'panel refused the upgrade');
        res.resume();
        socket.terminate();
        return;
      }
      // 403: the body's code tells a decommissioned node (its agent stops what it runs) from any other refusal.
      void refusalCode(res).then((code) => {
        const decommissioned = code === DECOMMISSIONED_REFUSAL_CODE;
        log[decommissioned ? 'warn' : 'error']({ status: res.statusCode, code }, `panel refused this node token${decommissioned ? ': the node is decommissioned' : ''}`);
        if (decommissioned) this.emit('decommissioned', { how: `upgrade refused: 403 ${code}` });
        socket.terminate();
      });
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
    const observation = await this.options.workloads.observe().catch((err: unknown) => ({
      containers: [],
      runtime: { available: false, error: errorMessage(err) },
    }));
    const privateAddress = remoteRoutingAddress(this.options);
    const port = challengePort(this.options);
    this.sendOn(socket, {
      type: 'hello',
      id: this.nextId(),
      node: this.options.nodeName,
      agentVersion: this.options.agentVersion,
      protocolVersion: this.protocolVersion,
      containers: observation.containers,
      runtime: runtimeStatus(observation.runtime),
      routing: this.routingStatus(),
      capabilities: agentCapabilities(this.options),
      ...(privateAddress ? { privateAddress } : {}),
      ...(port !== null ? { challengePort: port } : {}),
      ...(this.fence ? { fence: this.options.fence! } : {}),
    });
  }

  /** Reload and canary events to a panel that speaks proxy.events (event-sender.ts). */
  private sendEvents(): void {
    const socket = this.socket;
    if (!socket || this.state_ !== 'ready') return;
    this.events?.flush((message) => this.sendOn(socket, message));
  }

  private routingStatus(): RoutingStatus {
    return routingStatus(this.options.routing.status());
  }

  private armIdle(timeoutMs: number): void {
    this.idle?.cancel();
    this.idle = new Deadline({ timeoutMs, onExpire: (silentMs) => this.onIdle(timeoutMs, silentMs), clock: this.options.clock });
  }

  private onIdle(timeoutMs: number, silentMs: number): void {
    const socket = this.socket;
    if (!socket) return;
    const silentForMs = Math.floor(silentMs);
    this.options.logger.warn({ timeoutMs, silentForMs, sessionId: this.sessionId }, 'panel silent past the read-idle deadline; dropping the connection');
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
      this.options.logger.warn({ sessionId: this.sessionId }, 'a frame on a session older than the fence: reconnecting for a fresh set');
      socket.terminate();
      return;
    }
    this.idle?.touch();
    const message = result.message as PanelMessage;
    if (this.router.route(message)) return;
    this.sendOn(socket, {
      type: 'error',
      id: this.nextId(),
      ref: message.id,
      code: FRAME_ERROR_CODES.UNEXPECTED_MESSAGE,
      message: `${message.type} is not accepted from the panel`,
    });
  }

  /** Where each frame from the panel goes; a handler answering false refuses it on this session. */
  private routeFrames(): void {
    const ack = (ref: string) => this.send({ type: 'ack', id: this.nextId(), ref });
    this.router
      .handle('welcome', (message) => {
        const socket = this.socket!;
        this.confirmed = message.capabilities ?? [];
        this.onWelcome(socket, message.sessionId, message.timing, message.capabilities ?? []);
        this.attachLogs(socket, message.capabilities ?? []);
      })
      .handle('ping', (message) => void this.send({ type: 'pong', id: this.nextId(), ref: message.id }))
      // For a session that agreed on workload.allocations, the allocations set is the one intent path.
      .handle('deploy', (message) => {
        if (this.allocationsAgreed) return false;
        ack(message.id);
        void this.carryOut(message.workload);
      })
      .handle('workloads', (message) => {
        if (this.allocationsAgreed) return false;
        ack(message.id);
        this.fence?.freshSet();
        this.options.workloads.setDesired(message.workloads);
      })
      .handle('volumes.remove', (message) => {
        // Only on a session that agreed on workload.volumes (and volumes.inventory for single volumes).
        const agreed = this.confirmed.includes(CAPABILITIES.WORKLOAD_VOLUMES) && (!message.names || this.confirmed.includes(CAPABILITIES.VOLUMES_INVENTORY));
        if (!this.options.workloads.removeVolumes || !agreed) return false;
        // ACKed once recorded in the state dir, so a restart resumes it; the work itself comes after.
        const acked = () => void ack(message.id);
        this.options.workloads.removeVolumes(message.serviceId, message.names).then(acked, acked);
      })
      .handle('allocations', (message) => {
        if (!this.allocationsAgreed || !this.options.workloads.setAllocations) return false;
        ack(message.id);
        this.allocationsRef = message.id;
        this.fence?.freshSet();
        this.options.workloads.setAllocations({ id: message.id, allocations: message.allocations, releases: message.releases });
      })
      .handle('certificates', (message) => {
        const sharing = this.options.routing.certificateSharing;
        if (!sharing || !this.confirmed.includes(CAPABILITIES.CERTIFICATES_SHARE)) return false;
        ack(message.id);
        // The domains only: a key is never logged.
        void sharing.install(message.certificates).then(
          ({ failed }) => this.options.logger.info({ domains: message.certificates.map((c) => c.domain), failed }, 'shared certificates installed'),
          (err: unknown) => this.options.logger.warn({ error: errorMessage(err) }, 'shared certificates not installed'),
        );
      })
      .handle('routing.map', (message) => {
        ack(message.id);
        void this.applyRouting(this.socket!, message.id, { version: message.version, hash: message.hash, routes: message.routes });
      })
      // Only on a session where both ends named the capability (attachLogs); else they are unexpected.
      .handle('logs.open', (message) => this.logsAttached && void this.options.logs?.open(message))
      .handle('logs.credit', (message) => this.logsAttached && void this.options.logs?.credit(message))
      .handle('logs.close', (message) => this.logsAttached && void this.options.logs?.close(message))
      .handle('error', (message) => {
        // Before welcome the only frame the agent sent is hello: this names its version (a v1 panel then closes with 4004).
        if (message.code === FRAME_ERROR_CODES.UNSUPPORTED_PROTOCOL_VERSION && this.state_ === 'handshaking') this.versionRefused = true;
        if (this.certificates?.refused(message)) return;
        this.options.logger.warn({ code: message.code, ref: message.ref, message: message.message }, 'panel rejected a frame');
      })
      .handle('ack', (message) => void (this.events?.acknowledged(message.ref) || this.certificates?.acknowledged(message.ref)));
  }

  /** Both ends named workload.allocations on this session (and the controller carries it out). */
  private get allocationsAgreed(): boolean {
    return this.confirmed.includes(CAPABILITIES.WORKLOAD_ALLOCATIONS) && this.options.workloads.setAllocations !== undefined;
  }

  /**
   * The allocations as the node runs them (`allocations.status`), complete, on a session that agreed on the
   * capability; not ACKed and never held: the next one repeats the state, and every new session gets one.
   * Nothing before the agent's first set (an empty list would say every allocation is gone).
   */
  private sendAllocationStatus(): void {
    if (!this.socket || this.state_ !== 'ready' || !this.allocationsAgreed) return;
    const statuses = this.options.workloads.allocationStatus?.();
    if (!statuses) return;
    // An endpoint only to a panel that named routing.remote back: another never routes to it.
    const remote = this.confirmed.includes(CAPABILITIES.ROUTING_REMOTE);
    const allocations = statuses.map(({ endpoint, ...s }) => ({ ...s, reason: s.reason === null ? null : freeText(s.reason), ...(remote && endpoint !== undefined ? { endpoint } : {}) }));
    this.send({ type: 'allocations.status', id: this.nextId(), ref: this.allocationsRef, allocations });
  }

  /** Sends on the current socket (frames are routed only while it is the current one). */
  private send(message: AgentMessage): boolean {
    return this.socket !== undefined && this.sendOn(this.socket, message);
  }

  /** Log streams run on a session whose welcome confirmed `logs`; their sender writes to this socket. */
  private attachLogs(socket: WebSocket, confirmed: readonly string[]): void {
    this.logsAttached = Boolean(this.options.logs) && confirmed.includes(CAPABILITIES.LOGS);
    if (!this.logsAttached) return;
    this.options.logs!.attach({
      send: (frame, onWritten) => {
        if (socket.readyState !== WebSocket.OPEN) return false;
        socket.send(frame, onWritten);
        return true;
      },
      nextId: () => this.nextId(),
    });
  }

  private onWelcome(socket: WebSocket, sessionId: string, timing: Timing, capabilities: readonly string[]): void {
    this.sessionId = sessionId;
    this.events?.sessionReady(capabilities, timing.ackTimeoutMs);
    this.sessionStartedAt = Date.now();
    this.state_ = 'ready';
    this.idleTimeoutMs = this.options.overrides?.agentIdleTimeoutMs ?? timing.agentIdleTimeoutMs;
    this.armIdle(this.idleTimeoutMs);
    if (this.fence && this.options.fence!.afterMs <= timing.pingIntervalMs) {
      this.options.logger.warn({ fenceAfterMs: this.options.fence!.afterMs, pingIntervalMs: timing.pingIntervalMs }, 'TETHER_FENCE_AFTER_MS is not above the panel ping interval: a quiet healthy session may fence');
    }
    const heartbeatMs = this.options.overrides?.heartbeatIntervalMs ?? timing.heartbeatIntervalMs;
    void this.heartbeat?.stop();
    this.heartbeat = createLoop({
      name: 'heartbeat',
      intervalMs: heartbeatMs,
      run: () => this.sendHeartbeat(socket),
      onError: (err) => this.options.logger.warn({ err }, 'heartbeat failed'),
    });
    this.heartbeat.start();
    // A drain's report goes only to a panel that speaks it (one that did not never sent drainSeconds).
    this.results.drain((result) => (result.type === 'deploy.drained' && !this.confirmed.includes(CAPABILITIES.WORKLOAD_DRAIN) ? undefined : this.sendOn(socket, result)));
    this.certificates?.sessionReady(capabilities, timing.ackTimeoutMs);
    this.sendEvents();
    this.sendAllocationStatus();
    void this.sendCertificates(socket);
    this.options.logger.info({ sessionId, heartbeatMs, idleTimeoutMs: this.idleTimeoutMs, protocolVersion: this.protocolVersion }, 'session ready');
    this.emit('ready', { sessionId, timing, protocolVersion: this.protocolVersion });
  }

  private async sendHeartbeat(socket: WebSocket): Promise<void> {
    if (socket !== this.socket || this.state_ !== 'ready') return;
    // Events whose proxy.events went unACKed (the panel's database was down) go again, with the same keys.
    this.sendEvents();
    const observation = await this.options.workloads.observe();
    const agreed = this.allocationsAgreed;
    this.sendOn(socket, {
      type: 'heartbeat',
      id: this.nextId(),
      seq: this.seq++,
      // allocationId travels only on a session where both ends named workload.allocations (docs/protocol.md).
      containers: agreed ? observation.containers : observation.containers.map(({ allocationId: _allocation, ...c }) => c),
      runtime: runtimeStatus(observation.runtime),
      routing: this.routingStatus(),
    });
    this.sendVolumes(socket);
    await this.sendCertificates(socket);
  }

  /** certificates.share: what the proxy obtained for domains this node issues and the panel has not stored. */
  private async sendCertificates(socket: WebSocket): Promise<void> {
    await this.certificates?.flush((message) => socket === this.socket && this.sendOn(socket, message));
  }

  /** The node's volumes, when the inventory has a revision this session has not been sent (capability volumes.inventory). */
  private sendVolumes(socket: WebSocket): void {
    if (!this.confirmed.includes(CAPABILITIES.VOLUMES_INVENTORY)) return;
    const snapshot = this.options.workloads.volumeSnapshot?.();
    if (!snapshot || snapshot.revision === this.volumesSent) return;
    if (this.sendOn(socket, { type: 'volumes.report', id: this.nextId(), volumes: snapshot.volumes })) this.volumesSent = snapshot.revision;
  }

  private async carryOut(workload: Parameters<WorkloadController['deploy']>[0]): Promise<void> {
    const outcome = await this.options.workloads.deploy(workload).catch((err: unknown) => ({
      status: 'failed' as const,
      code: AGENT_ERROR_CODES.AGENT_ERROR,
      reason: errorMessage(err),
    }));
    this.reportResult(workload.deploymentId, outcome);
  }

  /** Sends a deployment's outcome now, or on the next session if there is none. */
  reportResult(deploymentId: string, outcome: DeployOutcome): void {
    const result: DeployResult = {
      type: 'deploy.result',
      id: this.nextId(),
      deploymentId,
      status: outcome.status,
      reason: freeText(outcome.reason),
      code: outcome.status === 'failed' ? outcome.code : null,
      ...(outcome.status === 'running' && outcome.imageRef ? { imageRef: outcome.imageRef } : {}),
    };
    if (this.socket && this.state_ === 'ready' && this.sendOn(this.socket, result)) return;
    this.results.hold(result);
  }

  /** Sends a drain's end (`deploy.drained`) now, or on the next session if there is none. */
  reportDrained(report: DrainReport): void {
    const message: DeployDrained = { type: 'deploy.drained', id: this.nextId(), ...report };
    if (this.socket && this.state_ === 'ready' && this.confirmed.includes(CAPABILITIES.WORKLOAD_DRAIN) && this.sendOn(this.socket, message)) return;
    this.results.hold(message);
  }

  private async applyRouting(socket: WebSocket, ref: string, map: Parameters<RoutingController['apply']>[0]): Promise<void> {
    const result = await this.options.routing.apply(map).catch((err: unknown) => ({
      hash: map.hash,
      changed: false,
      reloaded: false,
      error: errorMessage(err),
      routing: this.options.routing.status(),
    }));
    // A map answered on a later session would name a frame that session never sent; the panel re-pushes on open.
    if (socket !== this.socket) return;
    this.sendOn(socket, {
      type: 'routing.applied',
      id: this.nextId(),
      ref,
      ...result,
      error: result.error === null ? null : freeText(result.error),
      routing: routingStatus(result.routing),
    });
  }

  private sendOn(socket: WebSocket, message: AgentMessage): boolean {
    if (socket.readyState !== WebSocket.OPEN) return false;
    socket.send(encode(message));
    return true;
  }

  private onClose(socket: WebSocket, code: number, reason: string): void {
    if (socket !== this.socket) return;
    this.idle?.cancel();
    this.logsAttached = false;
    this.confirmed = [];
    this.volumesSent = null;
    this.allocationsRef = null;
    this.options.logs?.detach();
    void this.heartbeat?.stop();
    this.heartbeat = undefined;
    const sessionId = this.sessionId;
    const versionRefused = !sessionId && (this.versionRefused || code === CLOSE_CODES.UNSUPPORTED_PROTOCOL_VERSION);
    this.events?.sessionClosed();
    this.certificates?.sessionClosed();
    const lasted = this.sessionStartedAt ? Date.now() - this.sessionStartedAt : 0;
    this.sessionId = null;
    this.sessionStartedAt = 0;
    this.socket = undefined;
    if (this.state_ === 'stopped') return;
    if (sessionId && lasted >= this.options.reconnect.healthySessionMs) this.backoff.reset();
    const lower = versionRefused ? versionBelow(this.versions, this.protocolVersion) : null;
    if (lower !== null) this.stepDownTo = lower;
    // A planned panel stop says when to come back (docs/protocol.md, "Retry hint"): spread within its window, not doubling.
    const hintMs = code === CLOSE_CODES.SERVICE_RESTART ? parseRetryHint(reason) : null;
    if (hintMs !== null) this.backoff.hint(hintMs);
    // Refused at the oldest version it speaks, the agent cannot help it: an operator upgrades or unpins a side.
    const terminal = this.terminal || TERMINAL_CLOSE_CODES.has(code) || (versionRefused && lower === null);
    if (code === CLOSE_CODES.DECOMMISSIONED) this.emit('decommissioned', { how: `session closed: ${code} ${reason}` });
    const retryInMs = lower !== null ? 0 : terminal ? this.options.reconnect.maxMs : this.backoff.next(this.refused);
    this.state_ = 'waiting';
    this.options.logger.warn(
      { code, reason, sessionId, retryInMs, hinted: this.backoff.isHinted, ...(versionRefused ? { refusedVersion: this.protocolVersion, nextVersion: lower } : {}) },
      'disconnected from panel',
    );
    this.emit('closed', { code, reason, sessionId, retryInMs });
    this.retryTimer = setTimeout(() => this.connect(), retryInMs);
  }
}
