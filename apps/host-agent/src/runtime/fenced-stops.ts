import type { Logger } from '@tether/common';
import type { AllocationExecutor } from './allocation-executor.js';
import type { ContainerReader, ReadContainer } from './container-reader.js';
import { stopAndRemove, type ExecutorDeps } from './executor.js';

// Capability workload.fence: fenced once no panel was heard for
// TETHER_FENCE_AFTER_MS, lifted by a set a fresh session brought. Fenced,
// every container of a fenced release is stopped (SIGTERM,
// TETHER_STOP_TIMEOUT_MS, SIGKILL) and removed at once, outside the service
// lanes (a rollout in one never holds the fence back), and no plan starts one
// again: passes stop any that shows up, and planFor leaves fenced allocations
// out (allocation-executor.ts).

export class FencedStops {
  /** Fenced containers being stopped now. */
  private readonly fencing = new Set<string>();

  constructor(private readonly o: { deps: ExecutorDeps; allocations: Pick<AllocationExecutor, 'fenced'>; reader: ContainerReader; callTimeoutMs: number; logger: Logger }) {}

  /** The session's fence (connection/panel-fence.ts) changed; false when it already was so. */
  set(fenced: boolean): boolean {
    const { o } = this;
    if (o.allocations.fenced === fenced) return false;
    o.allocations.fenced = fenced;
    o.logger.warn({ fenced }, fenced ? 'no panel heard for the fence deadline: stopping fenced containers' : 'a fresh set after the fence: fenced containers may run again');
    if (fenced) {
      void o.reader.read(o.callTimeoutMs).then(
        (rows) => this.stop(rows),
        (err: unknown) => o.logger.warn({ err }, 'reading containers for the fence failed; the next pass stops them'),
      );
    }
    return true;
  }

  /** While fenced: stops and removes every fenced container not already being stopped. */
  stop(rows: readonly ReadContainer[]): void {
    if (!this.o.allocations.fenced) return;
    for (const { actual } of rows) {
      if (!actual.fenced || this.fencing.has(actual.id)) continue;
      this.fencing.add(actual.id);
      void stopAndRemove(this.o.deps, actual)
        .then(
          () => this.o.logger.warn({ container: actual.name, allocationId: actual.allocationId }, 'fenced container stopped and removed'),
          (err: unknown) => this.o.logger.warn({ container: actual.name, err }, 'stopping a fenced container failed; the next pass retries'),
        )
        .finally(() => this.fencing.delete(actual.id));
    }
  }
}
