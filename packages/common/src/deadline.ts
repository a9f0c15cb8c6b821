// A deadline that is never early. Node arms and refreshes timers from the event
// loop's cached clock, rounded to the millisecond: a timer refreshed late in a
// busy tick can fire up to a millisecond before the real interval has passed
// (seen as "no frame for 2999 ms (deadline 3000 ms)"). So when the timer fires,
// the deadline measures the real silence on the monotonic clock and, when it
// is short, re-arms for the remainder instead of firing.
//
// Nor does it expire on its own process's stall. A loop turn runs due timers
// before it reads the sockets, so after a stall longer than the deadline the
// timer would fire while the frame that resets it waits unread in the socket
// (seen under CI load: a live session torn down 53 ms after its last frame,
// deadline 400 ms). An expiry is therefore confirmed after one I/O turn: the
// frames already received are read (and touch the deadline) first.

/** What a deadline reads time from and arms timers with; the system's unless a test injects one. */
export interface DeadlineClock {
  /** Monotonic milliseconds (fractions allowed). */
  now(): number;
  setTimer(fn: () => void, ms: number): DeadlineTimer;
  clearTimer(timer: DeadlineTimer): void;
  /** Runs `fn` after the I/O already waiting has been read (setImmediate); absent: at once (manual clocks). */
  afterIo?(fn: () => void): void;
}

/** Node's Timeout satisfies this as it is: no wrapper per timer (a panel holds one per session). */
export interface DeadlineTimer {
  refresh(): unknown;
}

export const systemDeadlineClock: DeadlineClock = {
  // The global, looked up per call, so tests' fake timers (which can fake `performance`) govern it too.
  now: () => globalThis.performance.now(),
  setTimer: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimer: (timer) => clearTimeout(timer as NodeJS.Timeout),
  afterIo: (fn) => void setImmediate(fn),
};

export interface DeadlineOptions {
  timeoutMs: number;
  /** Called once, with how long it really was since the last touch (always ≥ timeoutMs). */
  onExpire(elapsedMs: number): void;
  clock?: DeadlineClock;
}

export class Deadline {
  private readonly clock: DeadlineClock;
  private startedAt: number;
  private timer: DeadlineTimer | undefined;
  /** The duration the current timer was armed with: a full timeout, or a remainder after an early fire. */
  private armedMs = 0;
  private done = false;
  private readonly onTimer = () => this.fired(false);
  private readonly onConfirm = () => this.fired(true);

  constructor(private readonly options: DeadlineOptions) {
    this.clock = options.clock ?? systemDeadlineClock;
    this.startedAt = this.clock.now();
    this.arm(options.timeoutMs);
  }

  get timeoutMs(): number {
    return this.options.timeoutMs;
  }

  /** True once it expired or was cancelled. */
  get finished(): boolean {
    return this.done;
  }

  /** Time since the last touch (or the start), on the deadline's clock. */
  elapsed(): number {
    return this.clock.now() - this.startedAt;
  }

  /** Restarts the full interval from now. Cheap on the hot path: refreshes the armed timer in place. */
  touch(): void {
    if (this.done) return;
    this.startedAt = this.clock.now();
    if (this.armedMs === this.options.timeoutMs && this.timer) this.timer.refresh();
    else this.arm(this.options.timeoutMs);
  }

  cancel(): void {
    this.done = true;
    if (this.timer) this.clock.clearTimer(this.timer);
    this.timer = undefined;
  }

  private arm(ms: number): void {
    if (this.timer) this.clock.clearTimer(this.timer);
    this.armedMs = ms;
    this.timer = this.clock.setTimer(this.onTimer, ms);
  }

  private fired(confirmed: boolean): void {
    if (this.done) return;
    const elapsed = this.elapsed();
    const remaining = this.options.timeoutMs - elapsed;
    if (remaining > 0) {
      // Early by the loop clock's rounding: wait out the rest, at least a millisecond.
      this.arm(Math.max(1, Math.ceil(remaining)));
      return;
    }
    if (!confirmed && this.clock.afterIo) {
      this.clock.afterIo(this.onConfirm);
      return;
    }
    this.done = true;
    this.timer = undefined;
    this.options.onExpire(elapsed);
  }
}
