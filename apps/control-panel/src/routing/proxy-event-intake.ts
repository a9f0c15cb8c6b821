import { sanitizeText, type Logger } from '@tether/common';
import { CAPABILITIES, createIdGenerator, type ProxyEvents, type ReloadKind, type RoutingApplied } from '@tether/protocol';
import type { AgentSession } from '../sessions/session.js';

// Where the reloads and canary drops an agent reports are recorded: the old
// way (routing.applied with reloaded: true, from an agent without
// `proxy.events`) and the new one (`proxy.events`, stored then ACKed).

export interface ReloadRecorder {
  /**
   * A reload reported the old way (routing.applied with reloaded: true) by an agent without `proxy.events`.
   * `key` names the report (session and message id) so a retried write cannot record it twice.
   */
  reloaded(record: { nodeId: string; key?: string; at: Date; hashBefore: string | null; hashAfter: string; reason: string; kind?: ReloadKind }): Promise<void>;
}

/** Where `proxy.events` go: stored under their unique key, so a resent event is recorded once. */
export interface ProxyEventStore {
  /** Resolves with the events stored now (not stored before). */
  store(nodeId: string, events: ProxyEvents['events']): Promise<ProxyEvents['events']>;
}

export class ProxyEventIntake {
  private readonly nextId = createIdGenerator('r');

  constructor(private readonly options: { reloads: ReloadRecorder; events?: ProxyEventStore; logger: Logger }) {}

  /** A routing.applied that reloaded: recorded here only for an agent that does not report its reloads in proxy.events. */
  applied(session: AgentSession, message: RoutingApplied, hashBefore: string | null): void {
    // An agent with proxy.events reports every reload (also its own repairs) in that message, exactly once.
    if (!message.reloaded || session.hasCapability(CAPABILITIES.PROXY_EVENTS)) return;
    void this.options.reloads
      .reloaded({
        nodeId: session.nodeId,
        key: `${session.id}/${message.id}`,
        at: new Date(),
        hashBefore,
        hashAfter: message.hash,
        // Free text from the agent: kept, but never a NUL or a control character in the row.
        reason: sanitizeText(message.routing.lastReloadReason ?? 'routing changed'),
      })
      .catch((err: unknown) => this.options.logger.error({ err, node: session.nodeName }, 'could not record reload'));
  }

  /**
   * Stores reload and canary events, then ACKs them. No ACK when the store
   * fails: the agent keeps the events and sends them again (same keys), so
   * nothing is lost and nothing is counted twice.
   */
  proxyEvents(session: AgentSession, message: ProxyEvents): void {
    const store = this.options.events;
    if (!store) return;
    void store.store(session.nodeId, message.events).then(
      () => {
        session.send({ type: 'ack', id: this.nextId(), ref: message.id });
      },
      (err: unknown) => this.options.logger.error({ err, node: session.nodeName, events: message.events.length }, 'could not store proxy events; the agent sends them again'),
    );
  }
}
