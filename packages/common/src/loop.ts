// One abstraction for every periodic task in Tether (pings, flushes, routing
// pushes, safety sweeps): start/stop, no overlapping runs, errors reported
// instead of thrown into a timer, and an optional jitter.

export interface LoopOptions {
  name: string;
  intervalMs: number;
  /** Work to do each tick. A tick does not start while the previous one still runs. */
  run: () => void | Promise<void>;
  /** Called with every error `run` throws or rejects with; the loop keeps going. */
  onError?: (error: unknown, name: string) => void;
  /** Run once at start instead of waiting one interval. */
  runImmediately?: boolean;
  /** Spread ticks: each wait is intervalMs ± jitterRatio·intervalMs (0..1). */
  jitterRatio?: number;
  /** For tests: a random source in [0, 1). */
  random?: () => number;
  /** Keep the process alive for this loop (default false: loops never hold a process open). */
  ref?: boolean;
}

export interface Loop {
  readonly name: string;
  readonly running: boolean;
  start(): void;
  /** Stops scheduling; resolves once an in-flight run has finished. */
  stop(): Promise<void>;
  /** Runs now (coalesced with a run in flight) and restarts the interval. */
  trigger(): Promise<void>;
}

export function createLoop(options: LoopOptions): Loop {
  const random = options.random ?? Math.random;
  const jitter = Math.min(Math.max(options.jitterRatio ?? 0, 0), 1);
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let inFlight: Promise<void> | undefined;

  const nextDelay = () => {
    if (jitter === 0) return options.intervalMs;
    const spread = options.intervalMs * jitter;
    return Math.max(0, Math.round(options.intervalMs - spread + random() * 2 * spread));
  };

  const schedule = () => {
    if (!running) return;
    timer = setTimeout(tick, nextDelay());
    if (!options.ref) timer.unref();
  };

  const execute = (): Promise<void> => {
    if (inFlight) return inFlight;
    const current: Promise<void> = (async () => {
      try {
        await options.run();
      } catch (error) {
        options.onError?.(error, options.name);
      }
    })().then(() => {
      // Runs as a microtask, so after the assignment below even when `run` throws synchronously.
      if (inFlight === current) inFlight = undefined;
    });
    inFlight = current;
    return current;
  };

  function tick() {
    timer = undefined;
    void execute().then(schedule);
  }

  return {
    name: options.name,
    get running() {
      return running;
    },
    start() {
      if (running) return;
      running = true;
      if (options.runImmediately) tick();
      else schedule();
    },
    async stop() {
      running = false;
      if (timer) clearTimeout(timer);
      timer = undefined;
      await inFlight;
    },
    async trigger() {
      if (timer) clearTimeout(timer);
      timer = undefined;
      await execute();
      if (running && !timer) schedule();
    },
  };
}
