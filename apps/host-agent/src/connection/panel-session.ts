import type { Logger } from '@tether/common';
import WebSocket from 'ws';
import { createLoop, errorMessage, type Loop } from '@tether/common';
import { encode, type AgentMessage, type AllocationsDrained, type DeployDrained, type PanelMessage, type RoutingStatus, type Timing, type Workload } from '@tether/protocol';
import type { DeployOutcome, PendingEvents, RoutingController, RoutingMapInput, WorkloadController } from '../controllers.js';
import { AGENT_ERROR_CODES } from '../errors.js';
import type { LogStreams } from '../logs/index.js';
import { CertificateReporter } from './certificate-reporter.js';
import { DeployResultQueue } from './deploy-results.js';
import { EventSender } from './event-sender.js';
import { PanelFrameRouter } from './frame-router.js';
import { freeText, routingStatus, runtimeStatus } from './handshake.js';
import type { PanelFence } from './panel-fence.js';
import { SessionTerms } from './session-terms.js';

// One panel session: made at welcome, dropped when its socket closes (panel-connection.ts keeps the socket and
// the backoff). Everything that lives for one session is a field here: what it agreed on (session-terms.ts), the
// heartbeat at welcome's cadence, the log streams' channel, its proxy events in flight, the volumes revision it
// was sent, the `allocations` frame it last took, and where each of its frames goes.

/** What outlives a session: the parts it drives and what waits for the next one. */
export interface SessionParts {
  workloads: WorkloadController;
  routing: RoutingController;
  logs?: LogStreams | undefined;
  /** The journal of reload and canary events (each session sends them through a sender of its own). */
  events: PendingEvents | null;
  certificates: CertificateReporter | null;
  /** Results that could not be sent, held for the next session. */
  results: DeployResultQueue;
  fence: PanelFence | null;
  nextId: () => string;
  /** Heartbeat sequence numbers: one count for the agent's run. */
  nextSeq: () => number;
  /** A deployment's outcome, sent now or held for the next session (PanelConnection.reportResult). */
  reportResult: (deploymentId: string, outcome: DeployOutcome) => void;
  /** TETHER_HEARTBEAT_INTERVAL_MS, when it overrides welcome's. */
  heartbeatIntervalMs?: number | undefined;
  logger: Logger;
}

/** The parts a connection's sessions share, made once with the connection. */
export function sessionParts(
  options: { workloads: WorkloadController; routing: RoutingController; logs?: LogStreams; events?: PendingEvents; overrides?: { heartbeatIntervalMs?: number }; logger: Logger },
  nextId: () => string,
  fence: PanelFence | null,
  reportResult: SessionParts['reportResult'],
): SessionParts {
  let seq = 0;
  const sharing = options.routing.certificateSharing;
  return {
    workloads: options.workloads,
    routing: options.routing,
    logs: options.logs,
    events: options.events ?? null,
    certificates: sharing ? new CertificateReporter(sharing, nextId, options.logger) : null,
    results: new DeployResultQueue(),
    fence,
    nextId,
    nextSeq: () => seq++,
    reportResult,
    heartbeatIntervalMs: options.overrides?.heartbeatIntervalMs,
    logger: options.logger,
  };
}

/** What a welcome says: the session's id, its timing, the capabilities it confirmed. */
export interface Welcome {
  sessionId: string;
  timing: Timing;
  capabilities: readonly string[];
}

export class PanelSession {
  readonly id: string;
  readonly startedAt = Date.now();
  readonly terms: SessionTerms;
  readonly heartbeatMs: number;
  private readonly router = new PanelFrameRouter();
  private readonly heartbeat: Loop;
  /** proxy.events of this session: what is in flight until the panel's ACK (event-sender.ts). */
  private readonly events: EventSender | null;
  /** The inventory revision this session was last sent in `volumes.report`. */
  private volumesSent: number | null = null;
  /** The id of this session's last `allocations` frame (`allocations.status` names it); null before the first. */
  private allocationsRef: string | null = null;
  private closing: Promise<void> | null = null;

  constructor(
    private readonly parts: SessionParts,
    private readonly socket: WebSocket,
    welcome: Welcome,
  ) {
    this.id = welcome.sessionId;
    this.terms = new SessionTerms(welcome.capabilities, parts);
    this.heartbeatMs = parts.heartbeatIntervalMs ?? welcome.timing.heartbeatIntervalMs;
    this.events = parts.events ? new EventSender(parts.events, parts.nextId) : null;
    this.heartbeat = createLoop({
      name: 'heartbeat',
      intervalMs: this.heartbeatMs,
      run: () => this.sendHeartbeat(),
      onError: (err) => parts.logger.warn({ err }, 'heartbeat failed'),
    });
    this.routeFrames();
  }

  /** The session begins: heartbeats, what waited for it, and the log streams' channel. */
  open(timing: Timing): void {
    const { parts, terms } = this;
    this.events?.sessionReady(terms.confirmed, timing.ackTimeoutMs);
    this.heartbeat.start();
    // A drain's report goes only to a panel that speaks it (one that did not never sent drainSeconds).
    parts.results.drain((result) => (result.type !== 'deploy.result' && !terms.takesDrain(result.type) ? undefined : this.send(result)));
    parts.certificates?.sessionReady(terms.confirmed, timing.ackTimeoutMs);
    this.sendEvents();
    this.sendAllocationStatus();
    void this.sendCertificates();
    const logs = terms.logs;
    logs?.attach({
      send: (frame, onWritten) => {
        if (this.socket.readyState !== WebSocket.OPEN) return false;
        this.socket.send(frame, onWritten);
        return true;
      },
      nextId: parts.nextId,
    });
  }

  /** The socket closed (or the agent stops): nothing of this session sends again. Idempotent. */
  close(): Promise<void> {
    if (this.closing) return this.closing;
    this.parts.logs?.detach();
    this.parts.certificates?.sessionClosed();
    return (this.closing = this.heartbeat.stop());
  }

  get closed(): boolean {
    return this.closing !== null;
  }

  /** False when no handler of this session takes the frame (the connection answers UNEXPECTED_MESSAGE). */
  handle(message: PanelMessage): boolean {
    return this.router.route(message);
  }

  send(message: AgentMessage): boolean {
    if (this.closed || this.socket.readyState !== WebSocket.OPEN) return false;
    this.socket.send(encode(message));
    return true;
  }

  /** A drain's end, when this session agreed on workload.drain and can take it. */
  sendDrained(message: DeployDrained | AllocationsDrained): boolean {
    return this.terms.takesDrain(message.type) && this.send(message);
  }

  /** Reload and canary events to a panel that speaks proxy.events (event-sender.ts). */
  sendEvents(): void {
    if (this.closed) return;
    this.events?.flush((message) => this.send(message));
  }

  /**
   * The allocations as the node runs them (`allocations.status`), complete, on a session that agreed on the
   * capability; not ACKed and never held: the next one repeats the state, and every new session gets one.
   * Nothing before the agent's first set (an empty list would say every allocation is gone).
   */
  sendAllocationStatus(): void {
    if (this.closed || !this.terms.allocations) return;
    const statuses = this.parts.workloads.allocationStatus?.();
    if (!statuses) return;
    // An endpoint only to a panel that named routing.remote back: another never routes to it.
    const remote = this.terms.remoteEndpoints;
    const allocations = statuses.map(({ endpoint, ...s }) => ({ ...s, reason: s.reason === null ? null : freeText(s.reason), ...(remote && endpoint !== undefined ? { endpoint } : {}) }));
    this.send({ type: 'allocations.status', id: this.parts.nextId(), ref: this.allocationsRef, allocations });
  }

  routingStatus(): RoutingStatus {
    return routingStatus(this.parts.routing.status());
  }

  /** Where each frame of this session goes; a handler answering false refuses it (a capability not agreed on). */
  private routeFrames(): void {
    const { parts, terms } = this;
    const { workloads, logger } = parts;
    const ack = (ref: string) => this.send({ type: 'ack', id: parts.nextId(), ref });
    this.router
      .handle('ping', (message) => void this.send({ type: 'pong', id: parts.nextId(), ref: message.id }))
      // For a session that agreed on workload.allocations, the allocations set is the one intent path.
      .handle('deploy', (message) => {
        if (terms.allocations) return false;
        ack(message.id);
        void this.carryOut(message.workload);
      })
      .handle('workloads', (message) => {
        if (terms.allocations) return false;
        ack(message.id);
        parts.fence?.freshSet();
        workloads.setDesired(message.workloads);
      })
      .handle('volumes.remove', (message) => {
        if (!terms.volumesRemove(message.names)) return false;
        // ACKed once recorded in the state dir, so a restart resumes it; the work itself comes after.
        const acked = () => void ack(message.id);
        workloads.removeVolumes!(message.serviceId, message.names).then(acked, acked);
      })
      .handle('allocations', (message) => {
        if (!terms.allocations) return false;
        ack(message.id);
        this.allocationsRef = message.id;
        parts.fence?.freshSet();
        workloads.setAllocations!({ id: message.id, allocations: message.allocations, releases: message.releases });
      })
      .handle('certificates', (message) => {
        const sharing = terms.certificates;
        if (!sharing) return false;
        ack(message.id);
        // The domains only: a key is never logged.
        void sharing.install(message.certificates).then(
          ({ failed }) => logger.info({ domains: message.certificates.map((c) => c.domain), failed }, 'shared certificates installed'),
          (err: unknown) => logger.warn({ error: errorMessage(err) }, 'shared certificates not installed'),
        );
      })
      .handle('routing.map', (message) => {
        ack(message.id);
        void this.applyRouting(message.id, { version: message.version, hash: message.hash, routes: message.routes });
      })
      // Only on a session where both ends named the capability; else they are unexpected.
      .handle('logs.open', (message) => terms.logs !== null && void terms.logs.open(message))
      .handle('logs.credit', (message) => terms.logs !== null && void terms.logs.credit(message))
      .handle('logs.close', (message) => terms.logs !== null && void terms.logs.close(message))
      .handle('error', (message) => {
        if (parts.certificates?.refused(message)) return;
        logger.warn({ code: message.code, ref: message.ref, message: message.message }, 'panel rejected a frame');
      })
      .handle('ack', (message) => void (this.events?.acknowledged(message.ref) || parts.certificates?.acknowledged(message.ref)));
  }

  private async sendHeartbeat(): Promise<void> {
    if (this.closed) return;
    // Events whose proxy.events went unACKed (the panel's database was down) go again, with the same keys.
    this.sendEvents();
    const observation = await this.parts.workloads.observe();
    const agreed = this.terms.allocations;
    this.send({
      type: 'heartbeat',
      id: this.parts.nextId(),
      seq: this.parts.nextSeq(),
      // allocationId travels only on a session where both ends named workload.allocations (docs/protocol.md).
      containers: agreed ? observation.containers : observation.containers.map(({ allocationId: _allocation, ...c }) => c),
      runtime: runtimeStatus(observation.runtime),
      routing: this.routingStatus(),
    });
    this.sendVolumes();
    await this.sendCertificates();
  }

  /** certificates.share: what the proxy obtained for domains this node issues and the panel has not stored. */
  private async sendCertificates(): Promise<void> {
    await this.parts.certificates?.flush((message) => this.send(message));
  }

  /** The node's volumes, when the inventory has a revision this session has not been sent (capability volumes.inventory). */
  private sendVolumes(): void {
    if (!this.terms.volumesInventory) return;
    const snapshot = this.parts.workloads.volumeSnapshot?.();
    if (!snapshot || snapshot.revision === this.volumesSent) return;
    if (this.send({ type: 'volumes.report', id: this.parts.nextId(), volumes: snapshot.volumes })) this.volumesSent = snapshot.revision;
  }

  private async carryOut(workload: Workload): Promise<void> {
    const outcome = await this.parts.workloads.deploy(workload).catch((err: unknown) => ({
      status: 'failed' as const,
      code: AGENT_ERROR_CODES.AGENT_ERROR,
      reason: errorMessage(err),
    }));
    this.parts.reportResult(workload.deploymentId, outcome);
  }

  private async applyRouting(ref: string, map: RoutingMapInput): Promise<void> {
    const { routing } = this.parts;
    const result = await routing.apply(map).catch((err: unknown) => ({
      hash: map.hash,
      changed: false,
      reloaded: false,
      error: errorMessage(err),
      routing: routing.status(),
    }));
    // A map answered on a later session would name a frame that session never sent; the panel re-pushes on open.
    if (this.closed) return;
    this.send({
      type: 'routing.applied',
      id: this.parts.nextId(),
      ref,
      ...result,
      error: result.error === null ? null : freeText(result.error),
      routing: routingStatus(result.routing),
    });
  }
}
