import type { AgentMessage } from '@tether/protocol';
import type { AgentSession } from './session.js';

// Where a frame of type X goes: one handler per agent message type,
// registered beside the code that handles it (the gateway registers the
// session's own: pong, ack, error; agent-side.ts the rest), and observers
// that see every frame after its handler (metrics, the cluster's report
// tracking). The gateway decodes and validates a frame, touches the session,
// then routes it here; nothing else switches on a frame's type.

/** Agent frames that reach an established session (hello ends before one exists). */
export type SessionFrameType = Exclude<AgentMessage['type'], 'hello'>;
export type SessionFrame<T extends SessionFrameType = SessionFrameType> = Extract<AgentMessage, { type: T }>;

export type FrameHandler<T extends SessionFrameType> = (session: AgentSession, message: SessionFrame<T>) => void;
export type FrameObserver = (session: AgentSession, message: SessionFrame) => void;

export class FrameRouter {
  private readonly handlers = new Map<SessionFrameType, FrameHandler<SessionFrameType>>();
  private readonly observers = new Set<FrameObserver>();

  /** Registers the handler of one type; a second one for the same type is a wiring bug and throws. Returns what removes it. */
  handle<T extends SessionFrameType>(type: T, handler: FrameHandler<T>): () => void {
    if (this.handlers.has(type)) throw new Error(`frame type ${type} already has a handler`);
    const h = handler as unknown as FrameHandler<SessionFrameType>;
    this.handlers.set(type, h);
    return () => {
      if (this.handlers.get(type) === h) this.handlers.delete(type);
    };
  }

  /** Sees every routed frame, after its handler. Returns what removes it. */
  observe(observer: FrameObserver): () => void {
    this.observers.add(observer);
    return () => void this.observers.delete(observer);
  }

  /** One valid frame of an established session, already touched. */
  route(session: AgentSession, message: SessionFrame): void {
    this.handlers.get(message.type)?.(session, message);
    for (const observe of this.observers) observe(session, message);
  }
}
