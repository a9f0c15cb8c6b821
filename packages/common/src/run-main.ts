import { ConfigError } from './env.js';

// The process shape both apps share: read the configuration (a bad one is
// exit 2 with every problem named), start, and on SIGINT or SIGTERM stop once
// and exit 0. Anything thrown while starting is exit 1. Signals that arrive
// while it stops are ignored: Ctrl-C reaches a launcher's children from the
// terminal and again from the launcher, and dying at the second one would
// leave the embedded PostgreSQL running without its panel (SIGKILL still ends
// a stop that hangs).

export interface Running {
  stop(signal: string): Promise<void>;
}

export function runMain<C>(load: () => C, start: (config: C) => Promise<Running>): void {
  let config: C;
  try {
    config = load();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
  // Handlers go in before starting (start may already say it started): a signal during start
  // stops the service once it has started. Signal handlers run on a later tick, after `state.started` is set.
  const state: { started?: Promise<Running> } = {};
  let stopping = false;
  const onSignal = (signal: string) => {
    if (stopping || !state.started) return;
    stopping = true;
    state.started
      .then((running) => running.stop(signal))
      .then(
        () => process.exit(0),
        (err: unknown) => {
          console.error(err);
          process.exit(1);
        },
      );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  state.started = start(config);
  state.started.catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
