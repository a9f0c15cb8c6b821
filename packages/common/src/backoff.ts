export interface BackoffOptions {
  /** First delay bound, ms. */
  initialMs: number;
  /** Cap on the delay bound, ms. */
  maxMs: number;
  /** Growth per attempt (default 2). */
  factor?: number;
  /**
   * Share of the bound that is random, 0..1 (default 1, "full jitter": a
   * uniform delay in [0, bound]). 0 waits exactly the bound, for delays a
   * test or a plan must predict (container restarts, deploy cooldowns).
   */
  jitter?: number;
  random?: () => number;
}

/** The bound for attempt `attempt` (0 = first): min(max, initial·factor^attempt). */
export function backoffCeiling(attempt: number, options: BackoffOptions): number {
  const factor = options.factor ?? 2;
  return Math.min(options.maxMs, options.initialMs * factor ** Math.max(0, attempt));
}

/**
 * The delay before attempt `attempt` (0 = first): exponential growth to a cap,
 * with `jitter` of it random. The one backoff formula of Tether, used for
 * reconnects, container restarts and deploy retry cooldowns.
 */
export function backoffDelay(attempt: number, options: BackoffOptions): number {
  const ceiling = backoffCeiling(attempt, options);
  const jitter = Math.min(Math.max(options.jitter ?? 1, 0), 1);
  if (jitter === 0) return ceiling;
  return Math.floor(ceiling * (1 - jitter + jitter * (options.random ?? Math.random)()));
}

/**
 * A backoff that counts its own attempts. With full jitter it spreads a fleet
 * of agents that lost the panel at the same moment, so they do not all come
 * back at once.
 */
export class Backoff {
  private attempt = 0;
  constructor(private readonly options: BackoffOptions) {}

  /** The bound (not the delay) for the next attempt. */
  ceiling(): number {
    return backoffCeiling(this.attempt, this.options);
  }

  next(): number {
    const delay = backoffDelay(this.attempt, this.options);
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
