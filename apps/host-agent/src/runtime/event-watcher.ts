import type { Logger } from '@tether/common';
import { Backoff } from '@tether/common';
import type { ContainerRuntime, EventSubscription, RuntimeEvent } from './container-runtime.js';

export interface EventWatcherOptions {
  runtime: ContainerRuntime;
  labels: Record<string, string>;
  reconnect: { initialMs: number; maxMs: number };
  logger: Logger;
  onEvent(event: RuntimeEvent): void;
  /** Opened (true) or lost (false). Whatever happened while it was down went unseen. */
  onState(open: boolean): void;
}

/**
 * Keeps one Docker event stream open for as long as it runs: when the daemon
 * goes away (stopped, restarted, socket gone) it reconnects with backoff, and
 * reports every open and every loss so the controller can reconcile.
 */
export class EventWatcher {
  private subscription: EventSubscription | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private open = false;
  private readonly backoff: Backoff;

  constructor(private readonly options: EventWatcherOptions) {
    this.backoff = new Backoff({ initialMs: options.reconnect.initialMs, maxMs: options.reconnect.maxMs });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.connect();
  }

  stop(): void {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.subscription?.close();
    this.subscription = undefined;
    this.open = false;
  }

  private connect(): void {
    this.timer = undefined;
    if (!this.running) return;
    const subscription = this.options.runtime.events(this.options.labels, {
      onOpen: () => {
        if (this.subscription !== subscription) return;
        this.backoff.reset();
        this.open = true;
        this.options.logger.debug({}, 'docker event stream open');
        this.options.onState(true);
      },
      onEvent: (event) => {
        if (this.subscription === subscription) this.options.onEvent(event);
      },
      onClose: (error) => {
        if (this.subscription !== subscription) return;
        this.subscription = undefined;
        const wasOpen = this.open;
        this.open = false;
        if (wasOpen) {
          this.options.logger.warn({ err: error }, 'docker event stream lost; reconnecting');
          this.options.onState(false);
        }
        if (!this.running) return;
        this.timer = setTimeout(() => this.connect(), this.backoff.next());
        this.timer.unref();
      },
    });
    this.subscription = subscription;
  }
}
