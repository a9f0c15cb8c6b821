// What a test peer received, in order, with a way to wait for something in it.
// Used by the hand-driven agents and panels of the session tests.

export class Inbox<T> {
  readonly items: T[] = [];
  private readonly listeners = new Set<() => void>();

  push(item: T): void {
    this.items.push(item);
    this.notify();
  }

  /** Wakes waiters whose condition depends on more than the items (e.g. a socket closing). */
  notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  /** Resolves with the first item (past or future) matching `predicate`. */
  waitFor<U extends T = T>(predicate: (item: T) => boolean, timeoutMs = 5_000, describe?: () => string): Promise<U> {
    return this.until(() => this.items.find(predicate) as U | undefined, timeoutMs, describe);
  }

  /** Resolves with the first non-undefined value of `probe`, checked now and on every push or notify. */
  until<U>(probe: () => U | undefined | null, timeoutMs = 5_000, describe?: () => string): Promise<U> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const value = probe();
        if (value === undefined || value === null) return;
        done();
        resolve(value);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`not within ${timeoutMs} ms${describe ? `: ${describe()}` : ''}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.listeners.delete(check);
      };
      this.listeners.add(check);
      check();
    });
  }
}
