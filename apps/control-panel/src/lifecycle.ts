import type { Logger } from '@tether/common';

// The panel's background parts (loops, listeners, streams, the outbox, the
// lease) are components of one list: its order is the start order, its
// reverse the stop order. app.ts declares the list and runs it from one
// onReady and one preClose hook; a part made inside an HTTP plugin (its state
// is the plugin's) fills the slot app.ts declared for it. Nothing else starts
// or stops a background part, so the order a newcomer reads is the order that
// runs (docs/architecture.md, "Lifecycle").

export interface Component {
  start?(): void | Promise<void>;
  stop?(): void | Promise<void>;
}

export class Lifecycle {
  private readonly parts = new Map<string, Component | undefined>();
  private started: string[] = [];

  /** `order`: every component's name, in start order. */
  constructor(
    order: readonly string[],
    private readonly logger: Logger,
  ) {
    for (const name of order) {
      if (this.parts.has(name)) throw new Error(`lifecycle: "${name}" is declared twice`);
      this.parts.set(name, undefined);
    }
  }

  /** Fills a declared slot (once); an undeclared name is a programming error. */
  provide(name: string, component: Component): void {
    if (!this.parts.has(name)) throw new Error(`lifecycle: "${name}" is not in the declared order`);
    if (this.parts.get(name)) throw new Error(`lifecycle: "${name}" is provided twice`);
    this.parts.set(name, component);
  }

  /** The declared names, in start order, and whether each was provided (an optional part may be absent). */
  get order(): readonly { name: string; provided: boolean }[] {
    return [...this.parts].map(([name, c]) => ({ name, provided: c !== undefined }));
  }

  /**
   * Starts every provided component in order. One that fails stops those already started (in reverse) and
   * its error is thrown: a panel half started never serves.
   */
  async start(): Promise<void> {
    for (const [name, component] of this.parts) {
      if (!component) continue;
      try {
        await component.start?.();
      } catch (err) {
        this.logger.error({ err, component: name }, 'a component failed to start; stopping those already started');
        await this.stop();
        throw err;
      }
      this.started.push(name);
    }
  }

  /** Stops the started components in reverse order; an error is reported and the next one still stops. */
  async stop(): Promise<void> {
    const started = this.started.reverse();
    this.started = [];
    for (const name of started) {
      try {
        await this.parts.get(name)?.stop?.();
      } catch (err) {
        this.logger.error({ err, component: name }, 'a component failed to stop');
      }
    }
  }
}

/** What an HTTP plugin gets to fill the slot app.ts declared for its background part. */
export type Slots = Pick<Lifecycle, 'provide'>;
