import { backoffDelay, type Logger } from '@tether/common';
import { LABELS } from '../docker/docker-client.js';
import type { PendingRemoval, PendingRemovals } from '../volumes/index.js';
import type { VolumeInventory } from './volume-inventory.js';
import type { ContainerReader } from './container-reader.js';
import type { ContainerRuntime } from './container-runtime.js';

// A deleted service's volumes (capability workload.volumes; single kept
// volumes with volumes.inventory): its containers removed, then the volumes,
// in the service's lane. Recorded in the state dir before the panel's ACK, so
// an agent restart resumes it; retried with backoff while the agent runs
// (Docker may be away); dropped when the service runs on this node again.

export interface VolumeRemovalOptions {
  runtime: ContainerRuntime;
  node: string;
  reader: ContainerReader;
  /** The removals ACKed and not done yet (TETHER_STATE_DIR/volume-removals.json). */
  removals: PendingRemovals;
  /** Rescanned once volumes are gone (volumes.report). */
  inventory: VolumeInventory | undefined;
  callTimeoutMs: number;
  /** First retry delay (the backoff doubles up to 30 s). */
  retryMinMs: number;
  logger: Logger;
  /** The service is desired on this node (again): its removal is dropped. */
  wanted(serviceId: string): boolean;
  stopped(): boolean;
  /** Runs `work` in the service's lane. */
  enqueue(serviceId: string, work: () => Promise<void>): void;
}

const RETRY_MAX_MS = 30_000;

export class VolumeRemoval {
  constructor(private readonly o: VolumeRemovalOptions) {}

  /** At start: removals an earlier run ACKed and did not finish (the panel was told they were taken). */
  async resume(): Promise<void> {
    for (const removal of await this.o.removals.load()) {
      this.o.logger.info({ ...removal }, 'resuming a volume removal from before the restart');
      this.o.enqueue(removal.serviceId, () => this.purge(removal, 0));
    }
  }

  /** Resolves once the removal is recorded in the state dir; the work goes on in the service's lane. */
  async request(serviceId: string, names?: readonly string[]): Promise<void> {
    const removal: PendingRemoval = { serviceId, names: names ? [...names] : null };
    await this.o.removals.add(removal);
    this.o.enqueue(serviceId, () => this.purge(removal, 0));
  }

  /** The service's containers, then its volumes; retried with backoff while the agent runs (Docker may be away). */
  private async purge(removal: PendingRemoval, attempt: number): Promise<void> {
    const { o } = this;
    if (o.stopped()) return;
    const { serviceId, names } = removal;
    if (o.wanted(serviceId)) {
      // Deployed here again since (the panel refuses a kept volume's delete while its service is on the node).
      o.logger.warn({ ...removal }, 'volume removal dropped: the service runs on this node again');
      await o.removals.done(removal);
      return;
    }
    try {
      for (const r of await o.reader.read(o.callTimeoutMs, serviceId)) {
        await o.runtime.remove(r.actual.id);
        o.reader.invalidate(r.actual.id);
      }
      const volumes = (await o.runtime.listVolumes({ [LABELS.node]: o.node, [LABELS.service]: serviceId })).filter(
        (v) => names === null || names.includes(v.labels[LABELS.volume] ?? ''),
      );
      for (const v of volumes) await o.runtime.removeVolume(v.name);
      o.logger.info({ serviceId, volumes: volumes.map((v) => v.name) }, 'removed a deleted service\'s volumes');
      await o.removals.done(removal);
      void o.inventory?.rescan();
    } catch (err) {
      const delayMs = backoffDelay(attempt, { initialMs: o.retryMinMs, maxMs: RETRY_MAX_MS, jitter: 0 });
      o.logger.warn({ serviceId, err, retryInMs: delayMs }, 'removing a deleted service\'s volumes failed; retrying');
      const timer = setTimeout(() => o.enqueue(serviceId, () => this.purge(removal, attempt + 1)), delayMs);
      timer.unref();
    }
  }
}
