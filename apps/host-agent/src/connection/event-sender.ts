import { sanitizeText } from '@tether/common';
import { CAPABILITIES, FIELD_LIMITS, TIMING_DEFAULTS, type ProxyEvents } from '@tether/protocol';
import type { PendingEvents } from '../controllers.js';

// The session's side of proxy.events: sends the outbox's events to a panel
// that confirmed the capability, at most 500 a message, and forgets them only
// on the panel's ACK. What a message carried goes again when its ACK is late
// (the panel's database may be down) or the session ends (each session has a
// sender of its own, panel-session.ts); the panel's unique key stores each
// event once.

const BATCH = 500;
const key = (e: { epoch: number; seq: number }) => `${e.epoch}:${e.seq}`;

export class EventSender {
  private enabled = false;
  /** The panel named `proxy.static`: it takes the reload kind `static-move`; to any other it is a `change`. */
  private staticKinds = false;
  private ackTimeoutMs: number = TIMING_DEFAULTS.ackTimeoutMs;
  /** proxy.events in flight: message id → the keys it carries, and when it was sent. */
  private readonly inFlight = new Map<string, { keys: string[]; at: number }>();

  constructor(
    private readonly pending: PendingEvents,
    private readonly nextId: () => string,
  ) {}

  /** A session began (welcome): send only when the panel confirmed the capability. */
  sessionReady(capabilities: readonly string[], ackTimeoutMs: number): void {
    this.enabled = capabilities.includes(CAPABILITIES.PROXY_EVENTS);
    this.staticKinds = capabilities.includes(CAPABILITIES.PROXY_STATIC);
    this.ackTimeoutMs = ackTimeoutMs;
    this.inFlight.clear();
  }

  /** Sends what no message in flight carries; `send` returns false when the socket cannot take it. */
  flush(send: (message: ProxyEvents) => boolean): void {
    if (!this.enabled) return;
    const now = Date.now();
    for (const [id, sent] of this.inFlight) if (now - sent.at > this.ackTimeoutMs) this.inFlight.delete(id);
    const carried = new Set([...this.inFlight.values()].flatMap((m) => m.keys));
    const waiting = this.pending.pending().filter((e) => !carried.has(key(e)));
    for (let i = 0; i < waiting.length; i += BATCH) {
      // Free text leaves the agent sanitised, like every reason.
      const events = waiting
        .slice(i, i + BATCH)
        .map((e) =>
          e.event === 'reload'
            ? { ...e, kind: e.kind === 'static-move' && !this.staticKinds ? ('change' as const) : e.kind, reason: sanitizeText(e.reason, { maxLength: FIELD_LIMITS.text }) }
            : e,
        );
      const id = this.nextId();
      if (!send({ type: 'proxy.events', id, events })) return;
      this.inFlight.set(id, { keys: events.map(key), at: now });
    }
  }

  /** An ACK arrived; true when it answered a proxy.events message. */
  acknowledged(ref: string): boolean {
    const sent = this.inFlight.get(ref);
    if (!sent) return false;
    this.inFlight.delete(ref);
    void this.pending.acknowledge(sent.keys);
    return true;
  }
}
