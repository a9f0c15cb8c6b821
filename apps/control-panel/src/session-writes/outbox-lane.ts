// One lane of the session-fact outbox (outbox.ts): the durable facts are one,
// the coalesced times the other. A lane has at most one drain in flight and
// backs off on its own when the database refuses it.

export interface LaneOptions {
  stopped(): boolean;
  hasWork(): boolean;
  /** One write; false: the database refused it. */
  attempt(): Promise<boolean>;
  /** The next backoff after a refusal, from the last one (0: none yet). */
  retryDelay(previousMs: number): number;
  /** Everything the lane had is written. */
  drained?(): void;
}

/**
 * One lane of the outbox: at most one drain in flight, attempts until nothing
 * is left or the database refuses, then its own backoff before the next.
 */
export class Lane {
  refused = false;
  private active: Promise<boolean> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private delayMs = 0;

  constructor(private readonly options: LaneOptions) {}

  kick(): void {
    if (this.options.stopped() || this.timer || this.active) return;
    this.active = this.drain().finally(() => {
      this.active = undefined;
      // Work that arrived while the last attempt finished.
      if (!this.timer && this.options.hasWork()) this.kick();
    });
  }

  /** Writes everything pending now (no backoff wait). False when the database refused. */
  async flush(): Promise<boolean> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    while (this.active) await this.active;
    this.active = this.drain();
    try {
      return await this.active;
    } finally {
      this.active = undefined;
    }
  }

  private async drain(): Promise<boolean> {
    while (this.options.hasWork()) {
      if (await this.options.attempt()) continue;
      this.delayMs = this.options.retryDelay(this.delayMs);
      if (!this.options.stopped()) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.kick();
        }, this.delayMs);
        this.timer.unref();
      }
      return false;
    }
    this.delayMs = 0;
    this.options.drained?.();
    return true;
  }
}
