import type { EventEmitter } from 'node:events';

/**
 * Adds listeners to emitters of several kinds and remembers how to remove them: `on(emitter, event, listener)`
 * with each listener's arguments spelled out where it is added; `off()` removes every one.
 */
export function listeners(): {
  on: <T extends unknown[]>(emitter: object, event: string, listener: (...a: T) => void) => void;
  off: () => void;
} {
  const added: (() => void)[] = [];
  return {
    on(emitter, event, listener) {
      const target = emitter as EventEmitter;
      const l = listener as (...a: unknown[]) => void;
      target.on(event, l);
      added.push(() => target.off(event, l));
    },
    off: () => added.splice(0).forEach((f) => f()),
  };
}
