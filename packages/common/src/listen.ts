import type { EventEmitter } from 'node:events';

/** What a listener added with {@link listen} takes back. */
export type Unsubscribe = () => void;

/** Adds a listener to a typed emitter and returns what removes it. */
export function listen<T extends Record<keyof T, unknown[]>, K extends keyof T & string>(
  emitter: EventEmitter<T>,
  event: K,
  listener: (...args: T[K]) => void,
): Unsubscribe {
  // Node's typed EventEmitter cannot take a generic key; the key and the listener are checked in this signature.
  const untyped = emitter as unknown as EventEmitter;
  untyped.on(event, listener as (...args: unknown[]) => void);
  return () => void untyped.off(event, listener as (...args: unknown[]) => void);
}
