// A clock a test moves by hand, shaped like @tether/common's DeadlineClock.
// Its timers can fire `earlyMs` before their interval, as Node's do when they
// were armed or refreshed off the event loop's cached, rounded clock.

interface ManualTimer {
  at: number;
  ms: number;
  fn: () => void;
}

export interface ManualClockTimer {
  readonly id: number;
  refresh(): ManualClockTimer;
}

export class ManualClock {
  private time = 1_000;
  private seq = 0;
  private readonly timers = new Map<number, ManualTimer>();

  constructor(private readonly earlyMs = 0) {}

  now = (): number => this.time;

  setTimer = (fn: () => void, ms: number): ManualClockTimer => {
    const id = ++this.seq;
    this.timers.set(id, { at: this.time + ms - this.earlyMs, ms, fn });
    const handle: ManualClockTimer = {
      id,
      refresh: () => {
        const timer = this.timers.get(id);
        if (timer) timer.at = this.time + timer.ms - this.earlyMs;
        return handle;
      },
    };
    return handle;
  };

  clearTimer = (timer: { refresh(): unknown }): void => {
    this.timers.delete((timer as ManualClockTimer).id);
  };

  /** Timers armed and not yet fired or cleared. */
  get pending(): number {
    return this.timers.size;
  }

  /** Moves time forward in small steps, firing every timer that falls due on the way. */
  advance(ms: number, stepMs = 0.25): void {
    const end = this.time + ms;
    while (this.time < end) {
      this.time = Math.min(end, this.time + stepMs);
      for (const [id, timer] of [...this.timers]) {
        if (timer.at > this.time) continue;
        this.timers.delete(id);
        timer.fn();
      }
    }
  }
}
