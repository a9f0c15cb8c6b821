import { sanitizeText, type Logger } from '@tether/common';
import { CAPABILITIES, createIdGenerator, workloadCapabilities, type AllocationsDrained, type DeployDrained, type DeployResult, type Heartbeat, type Workload } from '@tether/protocol';
import { AppError, PanelError } from '../errors.js';
import { lackedDelivery, lacksDeliveryReason, needsDelivery, type PlannedWorkload, type SecretDelivery } from '../secrets/secret-delivery.js';
import type { PanelEvents } from '../panel-events.js';
import type { PanelMetrics } from '../panel-metrics.js';
import type { SessionRegistry } from '../sessions/registry.js';
import { AckTimeoutError, SessionClosedError, type AgentSession } from '../sessions/session.js';
import type { SessionStore } from '../session-writes/session-store.js';
import { containerReady } from '../node-health/container-verdict.js';
import { forAgent } from '../db/deployment-spec.js';

/** What the REST layer hands over once a deployment row is persisted (status `pending`). */
export interface DispatchRequest {
  deploymentId: string;
  nodeId: string;
  nodeName: string;
  workload: PlannedWorkload;
}

export interface DispatchOutcome {
  /** HTTP status for the POST answer: 202 delivered, 201 recorded only. */
  httpStatus: 201 | 202;
}

/**
 * Sends a persisted deployment to its node. Implementations update the
 * deployment row to its next state themselves and throw `AppError`s
 * (`NODE_UNREACHABLE`, `ACK_TIMEOUT`) after recording the terminal state.
 */
export interface DeploymentDispatcher {
  dispatch(request: DispatchRequest): Promise<DispatchOutcome>;
}

/** The capabilities `workload` needs that the session's agent did not announce. */
export function missingCapabilities(session: Pick<AgentSession, 'hasCapability'>, workload: Workload): string[] {
  return workloadCapabilities(workload).filter((c) => !session.hasCapability(c));
}

/** Told of each deploy right before it is sent on a session, and of each the agent reported failed (WorkloadSync). */
export interface SentDeploys {
  deploySent(session: AgentSession, workload: Workload): void;
  deployFailed(session: AgentSession, deploymentId: string): void;
}

// Sends persisted deployments over live sessions and moves their rows to the
// next state. No live session: the deployment ends `unreachable` at once
// (no waiting, no retry loop). No ACK in time: the session is killed, the
// deployment ends `ack_timeout`, and the next deploy fails fast.

export class SessionDispatcher implements DeploymentDispatcher {
  private readonly nextId = createIdGenerator('p');
  /**
   * Per node: deployments delivered but without a result yet, with the session they were delivered on
   * (null: an earlier one, loaded from the database when the node rejoined).
   */
  private readonly awaitingResult = new Map<string, Map<string, string | null>>();

  private readonly registry: SessionRegistry;
  private readonly store: SessionStore;
  private readonly events: PanelEvents;
  private readonly logger: Logger;
  private readonly metrics: PanelMetrics | undefined;
  private readonly sentDeploys: SentDeploys | undefined;
  private readonly secrets: SecretDelivery | undefined;

  constructor(deps: {
    registry: SessionRegistry;
    store: SessionStore;
    events: PanelEvents;
    logger: Logger;
    metrics?: PanelMetrics;
    sentDeploys?: SentDeploys;
    /** Adds secrets' values to the frame; without it a deployment with secrets fails. */
    secrets?: SecretDelivery;
  }) {
    this.registry = deps.registry;
    this.secrets = deps.secrets;
    this.sentDeploys = deps.sentDeploys;
    this.store = deps.store;
    this.events = deps.events;
    this.logger = deps.logger;
    this.metrics = deps.metrics;
  }

  async dispatch(request: DispatchRequest): Promise<DispatchOutcome> {
    try {
      const outcome = await this.send(request);
      this.metrics?.deployDispatches.inc({ outcome: 'delivered' });
      return outcome;
    } catch (err) {
      this.metrics?.deployDispatches.inc({ outcome: err instanceof AppError ? err.code.toLowerCase() : 'error' });
      throw err;
    }
  }

  private async send(request: DispatchRequest): Promise<DispatchOutcome> {
    const session = this.registry.get(request.nodeId);
    if (!session) {
      const reason = this.unreachableReason(request.nodeId, request.nodeName);
      await this.store.deploymentFinished(request.deploymentId, 'unreachable', reason);
      throw new AppError('NODE_UNREACHABLE', reason, { nodeId: request.nodeId, deploymentId: request.deploymentId });
    }
    // drainSeconds as this agent takes it: the default left out for an agent without workload.drain.
    request = { ...request, workload: forAgent(session, request.workload) };
    const lacking = missingCapabilities(session, request.workload);
    if (lacking.length > 0) {
      // Never sent: an agent that did not announce a field would run the deployment without it.
      const reason = `AGENT_LACKS_CAPABILITY: node ${request.nodeName}'s agent did not announce ${lacking.join(', ')}, which this deployment needs; upgrade the agent`;
      await this.store.deploymentFinished(request.deploymentId, 'failed', reason);
      throw new AppError('AGENT_LACKS_CAPABILITY', reason, { nodeId: request.nodeId, deploymentId: request.deploymentId, capabilities: lacking });
    }
    const workload = await this.wireWorkload(request, session);
    // An agent with workload.drain reports the drain after running (deploy.drained): event streams wait for it.
    await this.store.deploymentDispatched(request.deploymentId, session.id, session.hasCapability(CAPABILITIES.WORKLOAD_DRAIN));
    const sentAt = performance.now();
    this.sentDeploys?.deploySent(session, workload);
    try {
      await session.sendAwaitingAck({ type: 'deploy', id: this.nextId(), workload });
      this.metrics?.ackWait.observe((performance.now() - sentAt) / 1000);
    } catch (err) {
      if (err instanceof AckTimeoutError) {
        const reason = `node ${request.nodeName} did not acknowledge the deploy within ${err.timeoutMs} ms; session ${session.id} was closed and the node is unreachable until it rejoins`;
        await this.store.deploymentFinished(request.deploymentId, 'ack_timeout', reason);
        throw new AppError('ACK_TIMEOUT', reason, { nodeId: request.nodeId, deploymentId: request.deploymentId });
      }
      if (err instanceof SessionClosedError) {
        const reason = `node ${request.nodeName} is unreachable until it rejoins: its session closed before it acknowledged (${err.message})`;
        await this.store.deploymentFinished(request.deploymentId, 'unreachable', reason);
        throw new AppError('NODE_UNREACHABLE', reason, { nodeId: request.nodeId, deploymentId: request.deploymentId });
      }
      throw err;
    }
    await this.store.deploymentDelivered(request.deploymentId);
    this.awaiting(request.nodeId).set(request.deploymentId, session.id);
    // A first deployment puts the service's routes on the map; a redeploy leaves the map (and its hash) as it was.
    this.events.emit('routing.changed', { nodeIds: [request.nodeId], reason: `service ${request.workload.serviceName} deployed` });
    return { httpStatus: 202 };
  }

  /** The deploy frame's workload, secrets' values and registry credentials in; a deployment the agent cannot take as asked ends `failed` here. */
  private async wireWorkload(request: DispatchRequest, session: AgentSession): Promise<Workload> {
    if (!needsDelivery(request.workload)) return request.workload;
    const lacking = lackedDelivery(session, request.workload);
    if (lacking.length > 0 || !this.secrets) {
      const reason = lacksDeliveryReason(request.nodeName, lacking);
      await this.store.deploymentFinished(request.deploymentId, 'failed', reason);
      throw new AppError('AGENT_LACKS_CAPABILITY', reason, { nodeId: request.nodeId, deploymentId: request.deploymentId, capabilities: lacking });
    }
    try {
      const result = await this.secrets.toWire(session, [request.workload]);
      return result.wire[0]!;
    } catch (err) {
      if (!(err instanceof PanelError)) throw err;
      // The message names the secret or registry and the key, never a value. A tampered row or a key not given
      // is the stored data's fault, not a bug: a coded answer, and the deployment ends failed with the reason.
      const reason = `${err.code}: ${err.message}`;
      await this.store.deploymentFinished(request.deploymentId, 'failed', reason);
      throw new AppError('STORED_SECRET_UNREADABLE', reason, { deploymentId: request.deploymentId });
    }
  }

  private unreachableReason(nodeId: string, nodeName: string): string {
    const last = this.registry.lastTeardown(nodeId);
    const since = last ? ` since ${new Date(last.at).toISOString()} (${last.reason})` : '';
    return `node ${nodeName} is unreachable${since}; deploys fail until it rejoins`;
  }

  private awaiting(nodeId: string): Map<string, string | null> {
    let map = this.awaitingResult.get(nodeId);
    if (!map) this.awaitingResult.set(nodeId, (map = new Map()));
    return map;
  }

  /** A node rejoined: its deployments delivered on earlier sessions may still be settled by heartbeats. */
  async sessionOpened(session: AgentSession): Promise<void> {
    try {
      const awaiting = this.awaiting(session.nodeId);
      // A deploy sent on this session while the query ran keeps its session id.
      for (const id of await this.store.deliveredDeployments(session.nodeId)) if (!awaiting.has(id)) awaiting.set(id, null);
    } catch (err) {
      this.logger.error({ err, node: session.nodeName }, 'could not load delivered deployments');
    }
  }

  /** deploy.result ends its deployment. */
  resultReceived(session: AgentSession, message: DeployResult): Promise<void> {
    return this.guarded(session, message.type, async () => {
      // Free text from the agent (a crashed container's last output can hold any byte): kept, made storable.
      const text = sanitizeText(message.reason);
      const reason = message.code ? `${message.code}: ${text}` : text;
      if (message.status === 'failed') this.sentDeploys?.deployFailed(session, message.deploymentId);
      const imageRef = message.status === 'running' ? message.imageRef : undefined;
      const changed = await this.store.deploymentFinished(message.deploymentId, message.status, reason, session.nodeId, imageRef);
      this.awaitingResult.get(session.nodeId)?.delete(message.deploymentId);
      if (!changed) this.logger.debug({ node: session.nodeName, deploymentId: message.deploymentId }, 'result for a deployment that already ended');
    });
  }

  /**
   * deploy.drained: recorded on the deployment through the fact writer, once (the first report wins; a repeat, or
   * a deployment of another node, changes nothing). Not ACKed (docs/protocol.md).
   */
  drainedReceived(session: AgentSession, message: DeployDrained): Promise<void> {
    return this.guarded(session, message.type, async () => {
      const { deploymentId, connectionsOpenAtSwitch, connectionsCut } = message;
      const drainEndedAt = reportedTime(message.drainEndedAt);
      const recorded = await this.store.deploymentDrained({ deploymentId, nodeId: session.nodeId, connectionsOpenAtSwitch, connectionsCut, drainEndedAt });
      this.drainCounted(session, message, recorded, 'already recorded, or not a deployment of this node');
    });
  }

  /**
   * allocations.drained (capability allocations.drain): one rollout's drain of a managed deployment, recorded through
   * the fact writer (the first report naming an allocation wins); the deployment's drain is set once it is drained
   * (db/managed-drains.ts). Not ACKed.
   */
  allocationsDrainedReceived(session: AgentSession, message: AllocationsDrained): Promise<void> {
    return this.guarded(session, message.type, async () => {
      const { deploymentId, allocationIds, connectionsOpenAtSwitch, connectionsCut } = message;
      const report = { deploymentId, nodeId: session.nodeId, sessionId: session.id, allocationIds, connectionsOpenAtSwitch, connectionsCut, drainEndedAt: reportedTime(message.drainEndedAt) };
      const recorded = await this.store.allocationDrained(report);
      this.drainCounted(session, message, recorded, 'its allocations already reported, or none of this node');
    });
  }

  /** A drain report recorded counts in the node's drain metrics; one ignored is logged. */
  private drainCounted(session: AgentSession, message: DeployDrained | AllocationsDrained, recorded: boolean, ignored: string): void {
    const node = session.nodeName;
    if (!recorded) return void this.logger.debug({ node, deploymentId: message.deploymentId }, `drain report ignored: ${ignored}`);
    const cut = message.connectionsCut;
    this.metrics?.nodeDrains.inc({ node, counted: cut === null ? 'no' : 'yes' });
    if (cut !== null && cut > 0) this.metrics?.nodeDrainConnectionsCut.inc({ node }, cut);
  }

  /** A heartbeat may settle a deployment delivered on an earlier session. */
  heartbeatSeen(session: AgentSession, message: Heartbeat): Promise<void> {
    const waiting = this.awaitingResult.get(session.nodeId);
    if (!waiting || waiting.size === 0) return Promise.resolve();
    return this.guarded(session, message.type, async () => {
      for (const container of message.containers) {
        // Docker's "running" is not the agent's verdict: a new container is running while the agent still waits
        // out its min-ready time and health check, and may yet fail them. The session a deployment was delivered
        // on carries its deploy.result (the agent keeps results across reconnects), so only a deployment from an
        // earlier session (an agent restart may have lost its result) is settled by a heartbeat, once it is healthy.
        const deliveredOn = waiting.get(container.deploymentId);
        if (deliveredOn === undefined || deliveredOn === session.id) continue;
        if (!containerReady(container)) continue;
        waiting.delete(container.deploymentId);
        await this.store.deploymentFinished(container.deploymentId, 'running', `observed running in heartbeat ${message.seq} of session ${session.id}`, session.nodeId);
      }
    });
  }

  private async guarded(session: AgentSession, type: string, work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (err) {
      // The database did not take it in time: the update stays queued in the outbox and is written when it answers.
      if (err instanceof AppError && err.code === 'DATABASE_UNAVAILABLE') {
        this.logger.warn({ node: session.nodeName, type }, 'deployment update held until the database answers');
        return;
      }
      this.logger.error({ err, node: session.nodeName, type }, 'deployment update failed');
    }
  }
}

/** The protocol bounds the time's text, not its meaning: one that is no time is recorded as received here. */
function reportedTime(text: string): string {
  const reported = new Date(text);
  return (Number.isNaN(reported.getTime()) ? new Date() : reported).toISOString();
}
