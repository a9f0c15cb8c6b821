import { KeyedSerialQueue, type Logger } from '@tether/common';
import { CAPABILITIES, createIdGenerator, type Workload } from '@tether/protocol';
import { needsDelivery, type PlannedWorkload, type SecretDelivery } from '../secrets/secret-delivery.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { AgentSession } from '../sessions/session.js';
import { missingCapabilities } from './session-dispatcher.js';
import type { DesiredWorkloads, SessionStore } from '../session-writes/session-store.js';
import { forAgent } from '../db/deployment-spec.js';

// Sends every node the complete set of workloads it should run: when its
// session opens (so nothing decided while it was away is lost) and whenever
// the set changes. The agent reconciles towards it, and removes what the set
// leaves out.
//
// A set read from the database can be older than a deploy already sent on the
// session: the read may have started before the deployment existed, and a
// deployment counts in the database only once its delivery has committed,
// after the agent's ACK. Sent after that deploy, such a set would make the
// agent remove what it was just told to run. So every set is sent with the
// newest deploy sent on the session for each of its services laid over it, at
// the moment it goes out (the socket keeps that order).

export class WorkloadSync {
  private readonly nextId = createIdGenerator('p');
  /** Sends to one session in order, so a slower read can never overtake a newer set. */
  private readonly sends = new KeyedSerialQueue<AgentSession>();
  /** Per session: the newest deploy sent on it, by service id (gone with the session). */
  private readonly sent = new WeakMap<AgentSession, Map<string, Workload>>();

  constructor(
    private readonly registry: SessionRegistry,
    private readonly store: SessionStore,
    private readonly logger: Logger,
    /** Adds secrets' values; without it workloads with secrets are left out of the set. */
    private readonly secrets?: SecretDelivery,
  ) {}

  /** A session opened: send it the whole set. */
  sessionOpened(session: AgentSession): void {
    this.enqueue(session, 'session opened');
  }

  /** The node's set changed: send it again if the node has a session. */
  changed(nodeId: string, reason: string): void {
    const session = this.registry.get(nodeId);
    if (session) this.enqueue(session, reason);
  }

  /** A deploy is about to be sent on the session: every later set carries it (see above). */
  deploySent(session: AgentSession, workload: Workload): void {
    let sent = this.sent.get(session);
    if (!sent) this.sent.set(session, (sent = new Map()));
    sent.set(workload.serviceId, workload);
  }

  /** The agent reported the deployment failed (it went back to what ran before): later sets leave it out. */
  deployFailed(session: AgentSession, deploymentId: string): void {
    const sent = this.sent.get(session);
    if (!sent) return;
    for (const [serviceId, workload] of sent) if (workload.deploymentId === deploymentId) sent.delete(serviceId);
  }

  /** Waits for the sends in flight (the registry closes the sessions). */
  async stop(): Promise<void> {
    await this.sends.idle();
  }

  private enqueue(session: AgentSession, reason: string): void {
    // An agent that speaks workload.allocations is sent `allocations` sets only (dispatch/allocation-sync.ts).
    if (session.hasCapability(CAPABILITIES.WORKLOAD_ALLOCATIONS)) return;
    void this.sends.run(session, () => this.send(session, reason));
  }

  private async send(session: AgentSession, reason: string): Promise<void> {
    try {
      const read = await this.store.desiredWorkloads(session.nodeId);
      if (session.closed) return;
      const stored = await this.wireWorkloads(session, read.workloads);
      if (session.closed) return;
      // No await between the overlay and the send: a deploy sent later is sent after this set.
      // A workload the agent cannot run as specified is left out (its deploy was refused the same way).
      // drainSeconds as the agent takes it (the default left out for one without workload.drain).
      const workloads = withSentDeploys({ workloads: stored.map((w) => forAgent(session, w)), placed: read.placed }, this.sent.get(session)).filter(
        (w) => missingCapabilities(session, w).length === 0,
      );
      await session.sendAwaitingAck({ type: 'workloads', id: this.nextId(), workloads });
      this.logger.debug({ node: session.nodeName, count: workloads.length, reason }, 'workloads sent');
    } catch (err) {
      // An ACK timeout already tore the session down; the next session gets the set again.
      this.logger.warn({ err, node: session.nodeName, reason }, 'workloads not delivered');
    }
  }

  /**
   * The frame form, secrets' values and registry credentials in. A workload with secrets or registry credentials never
   * runs without them: an agent that cannot take them is not sent it.
   */
  private async wireWorkloads(session: AgentSession, workloads: PlannedWorkload[]): Promise<Workload[]> {
    if (!workloads.some(needsDelivery)) return workloads;
    const { wire, refused } = this.secrets ? await this.secrets.toWire(session, workloads) : { wire: workloads.filter((w) => !needsDelivery(w)), refused: workloads.filter(needsDelivery) };
    if (refused.length > 0) {
      this.logger.warn({ node: session.nodeName, deployments: refused.map((w) => w.deploymentId) }, 'workloads with secrets or registry credentials left out: the agent does not announce the capability');
    }
    return wire;
  }
}

/**
 * The set read from the database with the deploys sent on the session laid
 * over it: for a service still placed on the node, a deploy sent on this
 * session is never older than what the database holds for it (this panel
 * sends every deploy of the node while the session lasts). A service deleted
 * or moved away is left out, whatever was sent for it.
 */
export function withSentDeploys(read: DesiredWorkloads, sent: ReadonlyMap<string, Workload> | undefined): Workload[] {
  if (!sent || sent.size === 0) return read.workloads;
  const placed = new Set(read.placed);
  const byService = new Map(read.workloads.map((w) => [w.serviceId, w]));
  for (const [serviceId, workload] of sent) {
    if (!placed.has(serviceId)) continue;
    const stored = byService.get(serviceId);
    if (stored?.deploymentId === workload.deploymentId) continue;
    // The name is the service's now (a rename after the deploy), as a read after the commit would give it.
    byService.set(serviceId, stored ? { ...workload, serviceName: stored.serviceName } : workload);
  }
  return [...byService.values()];
}
