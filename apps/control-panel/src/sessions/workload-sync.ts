import type { FastifyBaseLogger } from 'fastify';
import { createIdGenerator } from '@tether/protocol';
import type { PanelEvents } from '../panel-events.js';
import type { SessionRegistry } from './registry.js';
import type { AgentSession } from './session.js';
import type { SessionStore } from './session-store.js';

// Sends every node the complete set of workloads it should run: when its
// session opens (so nothing decided while it was away is lost) and whenever
// the set changes. The agent reconciles towards it.

export class WorkloadSync {
  private readonly nextId = createIdGenerator('p');
  /** Sends to one session in order, so a slower read can never overtake a newer set. */
  private readonly chains = new WeakMap<AgentSession, Promise<void>>();

  constructor(
    private readonly registry: SessionRegistry,
    private readonly store: SessionStore,
    events: PanelEvents,
    private readonly logger: FastifyBaseLogger,
  ) {
    registry.on('opened', (session) => this.enqueue(session, 'session opened'));
    events.on('workloads.changed', ({ nodeId, reason }) => {
      const session = registry.get(nodeId);
      if (session) this.enqueue(session, reason);
    });
  }

  private enqueue(session: AgentSession, reason: string): void {
    const next = (this.chains.get(session) ?? Promise.resolve()).then(() => this.send(session, reason));
    this.chains.set(session, next);
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
