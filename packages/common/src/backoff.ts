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

/** How long a retry hint (Backoff.hint) governs the delays before the ordinary growth takes over again. */
export const RETRY_HINT_HORIZON_MS = 60_000;

/**
 * A backoff that counts its own attempts. With full jitter it spreads a fleet
 * of agents that lost the panel at the same moment, so they do not all come
 * back at once.
 *
 * A peer that knows it will be back soon (a panel's planned restart) can give
 * a retry window W instead: `hint(W)`. The next attempt then comes uniformly
 * within [0, W) and each later one within [W/2, W], so while the peer is down
 * every agent tries at least once per W (cheap refusals) and, once it listens,
 * the whole fleet arrives spread over one W: the peer sizes W to what it can
 * open per second. Doubling would instead leave agents waiting 8–16 s after a
 * 10 s restart. An attempt that was not refused at once but timed out (the
 * peer is up and past its pace) doubles W, so a fleet that arrived faster than
 * the peer opens spreads itself out instead of retrying into a queue it
 * already fills; quick refusals (nobody listening, a reset or a 503 from a
 * peer stopping or shedding) keep W: measured, widening on those too left
 * agents that met the stopping panel waiting 13–27 s. The hint governs at most RETRY_HINT_HORIZON_MS of delays
 * (a peer that does not come back is not hammered forever); after that the
 * ordinary growth continues from the first bound at or above W.
 */
export class Backoff {
  private attempt = 0;
  /** The hinted window while a hint governs, with the delay it has spent so far. */
  private hinted: { windowMs: number; spentMs: number; attempts: number } | null = null;
  constructor(private readonly options: BackoffOptions) {}

  /** The bound (not the delay) for the next attempt. */
  ceiling(): number {
    return this.hinted ? this.hinted.windowMs : backoffCeiling(this.attempt, this.options);
  }

  /** The delay before the next attempt; `refused`: the last attempt was refused at once, it did not time out. */
  next(refused = false): number {
    const after = this.retryAfterMs;
    if (after !== null) {
      // Once, spread over [after, 2·after): the peer's own word beats the schedule, without bringing a fleet back at one instant.
      this.retryAfterMs = null;
      const delay = Math.min(Math.floor(after + after * (this.options.random ?? Math.random)()), this.options.maxMs);
      if (this.hinted) this.hinted.spentMs += delay;
      else this.attempt++;
      return delay;
    }
    const hinted = this.hinted;
    if (hinted && hinted.spentMs < RETRY_HINT_HORIZON_MS) {
      if (hinted.attempts > 0 && !refused) hinted.windowMs = Math.min(hinted.windowMs * 2, this.options.maxMs);
      const random = (this.options.random ?? Math.random)();
      const w = hinted.windowMs;
      const delay = Math.floor(hinted.attempts === 0 ? w * random : w / 2 + (w / 2) * random);
      hinted.attempts++;
      hinted.spentMs += delay;
      return delay;
    }
    if (hinted) {
      // The horizon passed: ordinary growth from the first bound not below the window (never back to the smallest).
      this.hinted = null;
      this.attempt = 0;
      while (backoffCeiling(this.attempt, this.options) < hinted.windowMs && backoffCeiling(this.attempt, this.options) < this.options.maxMs) this.attempt++;
    }
    const delay = backoffDelay(this.attempt, this.options);
    this.attempt++;
    return delay;
  }

  /**
   * The peer said when to come back: retry within windowMs (spread, see the class comment) instead of the
   * ordinary growth. A window is capped at the backoff's own cap; a new hint replaces an older one.
   */
  hint(windowMs: number): void {
    const w = Math.min(Math.max(1, Math.floor(windowMs)), this.options.maxMs);
    this.hinted = { windowMs: w, spentMs: 0, attempts: 0 };
  }

  /**
   * A peer that is up but shedding (503 with Retry-After) named when to try again: the next delay only is
   * within [ms, 2·ms) (at most the cap), whatever the schedule (a hinted window keeps its size and goes on after it). Measured:
   * hinted agents refused by a busy panel right after it listened waited a whole window (3–7 s) more, the
   * tail of the restart storm (docs/benchmarks.md, "The storm, third round").
   */
  retryAfter(ms: number): void {
    this.retryAfterMs = Math.min(Math.max(1, Math.floor(ms)), this.options.maxMs);
  }

  private retryAfterMs: number | null = null;

  /** A hint governs the next delay. */
  get isHinted(): boolean {
    return this.hinted !== null && this.hinted.spentMs < RETRY_HINT_HORIZON_MS;
  }

  reset(): void {
    this.attempt = 0;
    this.hinted = null;
    this.retryAfterMs = null;
  }

  get attempts(): number {
    return this.attempt + (this.hinted?.attempts ?? 0);
  }
}
