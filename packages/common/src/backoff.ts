export interface BackoffOptions {
  /** First delay bound, ms. */
  initialMs: number;
  /** Cap on the delay bound, ms. */
  maxMs: number;
  /** Growth per attempt (default 2). */
  factor?: number;
  random?: () => number;
}

/**
 * Exponential backoff with full jitter: attempt n waits a uniform random time
 * in [0, min(max, initial·factor^n)]. Spreads a fleet of agents that lost the
 * panel at the same moment, so they do not all come back at once.
 */
export class Backoff {
  private attempt = 0;
  constructor(private readonly options: BackoffOptions) {}

  /** The bound (not the delay) for the next attempt. */
  ceiling(): number {
    const factor = this.options.factor ?? 2;
    return Math.min(this.options.maxMs, this.options.initialMs * factor ** this.attempt);
  }

  next(): number {
    const delay = Math.floor((this.options.random ?? Math.random)() * this.ceiling());
    this.attempt++;
    return delay;
  }

  reset(): void {
    this.attempt = 0;
  }

  get attempts(): number {
    return this.attempt;
  }
}
