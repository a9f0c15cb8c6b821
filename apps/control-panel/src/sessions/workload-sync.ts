import { KeyedSerialQueue, type Logger } from '@tether/common';
import { createIdGenerator } from '@tether/protocol';
import type { SessionRegistry } from './registry.js';
import type { AgentSession } from './session.js';
import type { SessionStore } from './session-store.js';

// Sends every node the complete set of workloads it should run: when its
// session opens (so nothing decided while it was away is lost) and whenever
// the set changes. The agent reconciles towards it.

export class WorkloadSync {
  private readonly nextId = createIdGenerator('p');
  /** Sends to one session in order, so a slower read can never overtake a newer set. */
  private readonly sends = new KeyedSerialQueue<AgentSession>();

  constructor(
    private readonly registry: SessionRegistry,
    private readonly store: SessionStore,
    private readonly logger: Logger,
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

  /** Waits for the sends in flight (the registry closes the sessions). */
  async stop(): Promise<void> {
    await this.sends.idle();
  }

  private enqueue(session: AgentSession, reason: string): void {
    void this.sends.run(session, () => this.send(session, reason));
  }

  private async send(session: AgentSession, reason: string): Promise<void> {
    try {
      const workloads = await this.store.desiredWorkloads(session.nodeId);
      if (session.closed) return;
      await session.sendAwaitingAck({ type: 'workloads', id: this.nextId(), workloads });
      this.logger.debug({ node: session.nodeName, count: workloads.length, reason }, 'workloads sent');
    } catch (err) {
      // An ACK timeout already tore the session down; the next session gets the set again.
      this.logger.warn({ err, node: session.nodeName, reason }, 'workloads not delivered');
    }
  }
}
