import { FRAME_ERROR_CODES, type AgentMessage, type PanelMessage } from '@tether/protocol';

// Where a frame of type X from the panel goes: one handler per type,
// registered by the part that owns it (panel-connection.ts registers the
// session's own and the parts' handlers in one place). A handler answers
// false when its frame is not accepted on this session (a capability the
// session did not agree on); the connection then replies UNEXPECTED_MESSAGE,
// as it does for a type nobody handles.

export type PanelMessageType = PanelMessage['type'];
export type PanelMessageOf<T extends PanelMessageType> = Extract<PanelMessage, { type: T }>;
type Handler<T extends PanelMessageType> = (message: PanelMessageOf<T>) => boolean | void;

export class PanelFrameRouter {
  private readonly handlers = new Map<PanelMessageType, Handler<PanelMessageType>>();

  handle<T extends PanelMessageType>(types: T | readonly T[], handler: Handler<T>): this {
    for (const type of typeof types === 'string' ? [types] : types) {
      if (this.handlers.has(type)) throw new Error(`a handler for ${type} is registered already`);
      this.handlers.set(type, handler as unknown as Handler<PanelMessageType>);
    }
    return this;
  }

  /** False when no handler took the frame. */
  route(message: PanelMessage): boolean {
    const handler = this.handlers.get(message.type);
    return handler !== undefined && handler(message) !== false;
  }
}

/** The reply to a frame nobody takes on this connection. */
export function unexpected(message: PanelMessage, id: string): AgentMessage {
  return { type: 'error', id, ref: message.id, code: FRAME_ERROR_CODES.UNEXPECTED_MESSAGE, message: `${message.type} is not accepted from the panel` };
}
