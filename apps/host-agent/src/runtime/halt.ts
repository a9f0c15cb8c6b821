import type { Logger } from '@tether/common';
import type { ProxyTraffic } from '../controllers.js';
import type { ReadContainer } from './container-reader.js';
import type { ContainerRuntime } from './container-runtime.js';

// The node is decommissioned or lost (decommission-guard.ts): no pass plans
// anything; each one takes every Tether container still running out of the
// proxy's answers and stops it (no drain: its replacement runs elsewhere).
// The halt ends with the first set a panel sends after resume().

export class Halt {
  /** On: nothing is planned or started. */
  active = false;
  private releaseOnSet = false;
  /** Containers a halted pass took out of the answers. */
  private readonly ids = new Set<string>();

  constructor(
    private readonly o: {
      runtime: ContainerRuntime;
      traffic: () => ProxyTraffic | undefined;
      stopTimeoutMs: number;
      invalidate(id: string): void;
      logger: Logger;
    },
  ) {}

  begin(): void {
    this.active = true;
    this.releaseOnSet = false;
  }

  /** A panel welcomed the node again: the first set it sends (every session open brings one) ends the halt. */
  resume(): void {
    if (this.active) this.releaseOnSet = true;
  }

  /** A set from a panel: after resume() it ends the halt. */
  released(): void {
    if (!this.releaseOnSet) return;
    this.active = false;
    this.releaseOnSet = false;
    this.ids.clear();
  }

  /** What a halted node keeps out of the answers: what it stopped, and the checked containers not healthy. */
  notServing(unchecked: Iterable<string>): Set<string> {
    return new Set([...this.ids, ...unchecked]);
  }

  /** A halted pass: whatever still runs leaves the answers first, then stops. */
  async stopAll(rows: readonly ReadContainer[]): Promise<void> {
    const { o } = this;
    const live = rows.filter((r) => r.actual.state === 'running' || r.actual.state === 'restarting' || r.actual.state === 'paused');
    if (live.length === 0) return;
    for (const r of live) this.ids.add(r.actual.id);
    try {
      await o.traffic()?.switchAnswers();
    } catch (err) {
      o.logger.warn({ err }, 'the proxy did not confirm the stopped containers left its answers; stopping them all the same');
    }
    for (const r of live) {
      try {
        await o.runtime.stop(r.actual.id, o.stopTimeoutMs);
      } catch (err) {
        o.logger.warn({ container: r.actual.name, err }, 'stopping a container of a decommissioned node failed; the next pass retries');
      }
      o.invalidate(r.actual.id);
    }
    o.logger.info({ containers: live.map((r) => r.actual.name) }, 'containers of a decommissioned node stopped');
  }
}
