import type { Logger } from '@tether/common';
import type { Workload } from '@tether/protocol';
import type { DrainReport, DrainStats, ProxyTraffic } from '../controllers.js';
import { BoundedMap } from './bounded-map.js';
import type { DrainBook, DrainRecord } from './drain-book.js';

// The drain of a rollout (capability `workload.drain`, docs/architecture.md "Drain"):
// switch: the old containers leave the proxy's answers at once and the proxy's cached
// lookups expire (the deployment reports `running` then); drain: their open requests
// and streams go on until none is left or `drainSeconds` after the switch has passed;
// then they are stopped (SIGTERM, the stop grace) and removed, and the drain is reported.

/** How often a drain asks the proxy what is still open. */
export const DRAIN_POLL_MS = 250;
/** Wait before trying a failed stop or removal again (Docker away). */
const RETRY_STOP_MS = 1_000;

export interface DrainerOptions {
  book: DrainBook;
  /** The proxy's side; undefined: nothing is proxied (TETHER_PROXY=none), so nothing can be open. */
  traffic: () => ProxyTraffic | undefined;
  /** Stops (the stop grace) and removes one old container. */
  retire(container: { id: string; name: string }): Promise<void>;
  report(report: DrainReport): void;
  logger: Logger;
  pollMs?: number;
  now?: () => number;
}

export class Drainer {
  readonly stats: DrainStats = { ended: 0, connectionsCut: 0 };
  private readonly abort = new AbortController();
  private readonly active = new Set<Promise<void>>();
  private readonly now: () => number;
  /** Deployments whose drain this run reported (a redelivery must not report another). */
  private readonly reported = new BoundedMap<string, true>(1_000);

  constructor(private readonly options: DrainerOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * The switch: `old` leave the answers and no new request can reach them when this resolves; the drain is
   * recorded (it survives an agent restart). Call follow() with the record once `running` is reported.
   */
  async switchAway(workload: Workload, old: readonly { id: string; name: string }[], drainSeconds: number, allocationIds?: readonly string[]): Promise<DrainRecord> {
    const { book } = this.options;
    const ids = old.map((c) => c.id);
    book.mark(ids);
    const traffic = this.options.traffic();
    let openAtSwitch: number | null = 0;
    if (traffic) {
      await traffic.switchAnswers().catch((error: unknown) => this.options.logger.warn({ err: error, deploymentId: workload.deploymentId }, 'answers not switched at once; the periodic refresh retries'));
      openAtSwitch = await this.count(traffic, workload.serviceId, ids);
    }
    const switchedAt = this.now();
    const record: DrainRecord = {
      deploymentId: workload.deploymentId,
      serviceId: workload.serviceId,
      containers: old.map((c) => ({ id: c.id, name: c.name })),
      switchedAt,
      deadline: switchedAt + drainSeconds * 1000,
      openAtSwitch,
      ...(allocationIds && allocationIds.length > 0 ? { allocationIds: [...allocationIds] } : {}),
    };
    await book.add(record);
    return record;
  }

  /** Containers of a drain (or of a switch under way): out of the answers, and removed only by their drain. */
  draining(): ReadonlySet<string> {
    return this.options.book.draining();
  }

  /** The drain of this deployment is under way or was reported in this agent run. */
  knows(deploymentId: string): boolean {
    return this.options.book.has(deploymentId) || this.reported.has(deploymentId);
  }

  /** Runs the drain in the background until its containers are gone, then reports it. */
  follow(record: DrainRecord): void {
    const run = this.run(record)
      .catch((error: unknown) => this.options.logger.error({ err: error, deploymentId: record.deploymentId }, 'drain failed'))
      .finally(() => this.active.delete(run));
    this.active.add(run);
  }

  /**
   * A rollout that left nothing to drain (nothing replaced, or no overlap): 0 and 0, after its result. With
   * `allocationIds`: an allocation rollout's (allocations.drained), which never marks the deployment reported.
   */
  reportNothing(deploymentId: string, allocationIds?: readonly string[]): void {
    // After the microtasks that carry the deployment's result to the session: deploy.drained comes second.
    const ids = allocationIds && allocationIds.length > 0 ? { allocationIds: [...allocationIds] } : undefined;
    if (!ids) this.reported.set(deploymentId, true);
    setImmediate(() => this.options.report({ deploymentId, connectionsOpenAtSwitch: 0, connectionsCut: 0, drainEndedAt: new Date(this.now()).toISOString(), ...ids }));
  }

  /** Leaves the drains where they are (the state file resumes them at the next start). */
  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.all([...this.active]);
  }

  private async run(record: DrainRecord): Promise<void> {
    const cut = await this.until(record);
    if (this.abort.signal.aborted) return;
    for (const container of record.containers) {
      while (!this.abort.signal.aborted) {
        try {
          await this.options.retire(container);
          break;
        } catch (error) {
          this.options.logger.warn({ err: error, container: container.name }, 'stopping a drained container failed; retrying');
          await this.sleep(RETRY_STOP_MS);
        }
      }
    }
    if (this.abort.signal.aborted) return;
    await this.options.book.done(record);
    this.stats.ended += 1;
    this.stats.connectionsCut += cut ?? 0;
    const report: DrainReport = {
      deploymentId: record.deploymentId,
      connectionsOpenAtSwitch: record.openAtSwitch,
      connectionsCut: cut,
      drainEndedAt: new Date(this.now()).toISOString(),
      ...(record.allocationIds ? { allocationIds: record.allocationIds } : {}),
    };
    if (!record.allocationIds) this.reported.set(record.deploymentId, true);
    this.options.logger.info({ ...report, containers: record.containers.map((c) => c.name) }, 'drain ended');
    this.options.report(report);
  }

  /** Waits until nothing is open on the old containers or the deadline passed; what was still open then (null: the proxy could not be read). */
  private async until(record: DrainRecord): Promise<number | null> {
    const traffic = this.options.traffic();
    if (!traffic) return 0;
    const ids = record.containers.map((c) => c.id);
    const pollMs = this.options.pollMs ?? DRAIN_POLL_MS;
    for (;;) {
      const open = await this.count(traffic, record.serviceId, ids);
      if (open === 0) return 0;
      const left = record.deadline - this.now();
      if (left <= 0 || this.abort.signal.aborted) return open;
      await this.sleep(Math.min(pollMs, left));
    }
  }

  private count(traffic: ProxyTraffic, serviceId: string, ids: readonly string[]): Promise<number | null> {
    return traffic.openConnections(ids).catch((error: unknown) => {
      this.options.logger.warn({ err: error, serviceId }, 'open connections unknown (proxy not readable)');
      return null;
    });
  }

  private sleep(ms: number): Promise<void> {
    const signal = this.abort.signal;
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
