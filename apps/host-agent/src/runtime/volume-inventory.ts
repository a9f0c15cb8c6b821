import { createLoop, silentLogger, type Logger, type Loop } from '@tether/common';
import type { ReportedVolume } from '@tether/protocol';
import { LABELS } from '../docker/docker-client.js';
import type { VolumeSnapshot } from '../controllers.js';
import type { ContainerRuntime } from './container-runtime.js';
import { DEFAULT_MEASURE_BUDGET, measureFolder, type MeasureBudget } from '../volumes/measure-folder.js';

// The node's named volumes as `volumes.report` carries them (capability volumes.inventory): listed from
// Docker every scan, each one's data folder measured at most once per measure interval and within a
// budget (measure-folder.ts), so a node with big volumes pays a bounded walk per interval, never per report.

export interface VolumeInventoryOptions {
  runtime: ContainerRuntime;
  node: string;
  /** How often the volumes are listed (TETHER_VOLUME_SCAN_INTERVAL_MS). */
  scanIntervalMs: number;
  /** How long a measured size is kept before the folder is walked again (TETHER_VOLUME_MEASURE_INTERVAL_MS). */
  measureIntervalMs: number;
  budget?: MeasureBudget;
  logger?: Logger;
}

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

interface Measured {
  sizeBytes: number | null;
  measuredAt: string;
  at: number;
}

export class VolumeInventory {
  private readonly loop: Loop;
  private readonly sizes = new Map<string, Measured>();
  private readonly logger: Logger;
  private snapshot: VolumeSnapshot | null = null;
  private content = '';
  private revisedAt = 0;

  constructor(private readonly options: VolumeInventoryOptions) {
    this.logger = options.logger ?? silentLogger;
    this.loop = createLoop({
      name: `volume-inventory:${options.node}`,
      intervalMs: options.scanIntervalMs,
      jitterRatio: 0.1,
      runImmediately: true,
      run: () => this.scan(),
      // Docker away: the last snapshot stays (volumes outlive the daemon's absence); the next scan tries again.
      onError: (err) => this.logger.warn({ err }, 'listing volumes failed'),
    });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** A scan now (a volume was removed or made): the next report says so without waiting for the interval. */
  rescan(): Promise<void> {
    return this.loop.trigger();
  }

  /** The last scan's volumes; null before the first one succeeded. */
  current(): VolumeSnapshot | null {
    return this.snapshot;
  }

  private async scan(): Promise<void> {
    const { runtime, node, measureIntervalMs } = this.options;
    const listed = await runtime.listVolumes({ [LABELS.node]: node });
    const now = Date.now();
    const volumes: ReportedVolume[] = [];
    const names = new Set<string>();
    for (const v of listed.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const serviceId = v.labels[LABELS.service];
      const volume = v.labels[LABELS.volume];
      if (!serviceId || !volume || !LABEL.test(volume)) continue;
      names.add(v.name);
      let size = this.sizes.get(v.name);
      if (!size || now - size.at >= measureIntervalMs) {
        const result = v.mountpoint ? await measureFolder(v.mountpoint, this.options.budget ?? DEFAULT_MEASURE_BUDGET) : { sizeBytes: null, reason: 'unreadable' as const };
        if (result.sizeBytes === null) this.logger.debug({ volume: v.name, reason: result.reason }, 'volume size unknown');
        size = { sizeBytes: result.sizeBytes, measuredAt: new Date().toISOString(), at: now };
        this.sizes.set(v.name, size);
      }
      volumes.push({ dockerName: v.name, serviceId, volume, createdAt: v.createdAt, sizeBytes: size.sizeBytes, measuredAt: size.measuredAt });
    }
    for (const name of this.sizes.keys()) if (!names.has(name)) this.sizes.delete(name);
    // measuredAt alone changes once per interval anyway; the content without it decides a revision.
    const content = JSON.stringify(volumes.map((v) => [v.dockerName, v.createdAt, v.sizeBytes]));
    if (this.snapshot === null || content !== this.content || now - this.revisedAt >= measureIntervalMs) {
      this.content = content;
      this.revisedAt = now;
      this.snapshot = { volumes, revision: (this.snapshot?.revision ?? 0) + 1 };
    } else {
      this.snapshot = { volumes: this.snapshot.volumes, revision: this.snapshot.revision };
    }
  }
}
