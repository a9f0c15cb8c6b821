import type { Allocation, AllocationStatus, Release } from '@tether/protocol';
import type { ContainerRuntime } from './container-runtime.js';
import { pinImage } from './image-pin.js';
import type { AllocatedContainer } from './allocation-plan.js';
import type { AllocationFailure } from './allocation-book.js';
import { allocationStatuses } from './allocation-status.js';

// What `allocations.status` says now, and who hears when it changes: the pure
// allocationStatuses over the executor's view (the last containers read, the
// bindings of the last converge, rollouts and drains under way), computed on
// every change and on every heartbeat's read; listeners hear a report that
// differs from the last one they heard, and every applied set (forced).

export interface ReportView {
  allocations: readonly Allocation[];
  containers: readonly AllocatedContainer[];
  bindings: ReadonlyMap<string, string>;
  failure: (allocationId: string, deploymentId: string) => AllocationFailure | undefined;
  health: (container: AllocatedContainer) => AllocationStatus['health'];
  /** routing.remote: where a container's port is published on the private address; absent: nothing is published. */
  endpoint?: (container: AllocatedContainer) => string | null;
}

export class AllocationReport {
  /** Allocations of a rollout under way. */
  readonly rolling = new Map<string, 'pending' | 'starting'>();
  /** Containers of removed allocations on their way out, with the allocation each served. */
  readonly draining = new Map<string, { allocationId: string; container: AllocatedContainer }>();
  /** Pinned image per release, once a container of it ran here. */
  readonly imageRefs = new Map<string, string>();
  private previous = new Map<string, AllocationStatus>();
  private current: AllocationStatus[] = [];
  private heard = '';
  private readonly listeners = new Set<() => void>();

  constructor(private readonly view: () => ReportView | null) {}

  /** The last computed report; null before the agent's first set. */
  snapshot(): AllocationStatus[] | null {
    return this.view() ? this.current : null;
  }

  listen(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Recomputes; listeners hear it when it differs from what they last heard, or always with `force` (a set was applied). */
  update(force = false): void {
    const view = this.view();
    if (!view) return;
    this.current = allocationStatuses({
      ...view,
      rolling: this.rolling,
      draining: [...this.draining.values()],
      imageRefs: this.imageRefs,
      previous: this.previous,
      now: new Date().toISOString(),
    });
    this.previous = new Map(this.current.map((s) => [s.allocationId, s]));
    const text = JSON.stringify(this.current);
    if (!force && text === this.heard) return;
    this.heard = text;
    for (const listener of this.listeners) listener();
  }

  /** The image each serving release runs, pinned once per release. */
  async pinImages(runtime: ContainerRuntime, containers: readonly AllocatedContainer[], release: (deploymentId: string) => Release | undefined): Promise<void> {
    for (const deploymentId of new Set(containers.filter((c) => c.state === 'running').map((c) => c.deploymentId))) {
      const known = release(deploymentId);
      if (!known || this.imageRefs.has(deploymentId)) continue;
      const ref = await pinImage(runtime, known.image);
      if (ref) this.imageRefs.set(deploymentId, ref);
    }
  }
}
