import { errorMessage, sanitizeText, type Logger } from '@tether/common';
import type { RuntimeStatus } from '@tether/protocol';

// Whether the container runtime answers, as hello and every heartbeat report
// it (runtime.available, runtime.error), said once per outage in the log.

const NOT_STARTED = 'not started';

export class RuntimeAvailability {
  private status: RuntimeStatus = { available: false, error: NOT_STARTED };

  constructor(private readonly o: { node: string; logger: Logger }) {}

  get current(): RuntimeStatus {
    return { ...this.status };
  }

  /** The runtime answered; true when it was down until now (whatever happened meanwhile went unseen). */
  up(): boolean {
    const wasDown = !this.status.available;
    this.status = { available: true, error: null };
    if (wasDown) this.o.logger.info({ node: this.o.node }, 'docker runtime available');
    return wasDown;
  }

  down(err: unknown): void {
    const error = sanitizeText(errorMessage(err), { maxLength: 1000 });
    // Said once per outage, so an operator sees at start (and whenever it goes) why nothing runs.
    if (this.status.available || this.status.error === NOT_STARTED) this.o.logger.warn({ err }, 'docker runtime unavailable; reporting no containers until it answers');
    this.status = { available: false, error };
  }
}
