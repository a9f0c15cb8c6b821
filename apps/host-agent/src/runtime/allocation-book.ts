import type { Logger } from '@tether/common';
import type { Allocation } from '@tether/protocol';
import { JsonStateFile } from '../state/json-state-file.js';
import { failedKey } from './allocation-plan.js';

/**
 * What the agent must remember about allocations across its restarts (TETHER_STATE_DIR/allocations.json):
 * adoptions (allocation id → container id: a container placed before allocations existed carries no
 * `tether.allocation` label, and Docker labels cannot change) and the releases that failed for an
 * allocation (never retried until the panel changes that allocation's release, so a restart does not
 * start a failing rollout again).
 */
export interface AllocationFailure {
  allocationId: string;
  deploymentId: string;
  code: string;
  reason: string;
  /** Epoch ms. */
  at: number;
}

interface Saved {
  bindings: Record<string, string>;
  failures: AllocationFailure[];
}

const isFailure = (f: Partial<AllocationFailure>): f is AllocationFailure =>
  typeof f.allocationId === 'string' && typeof f.deploymentId === 'string' && typeof f.code === 'string' && typeof f.reason === 'string' && Number.isFinite(f.at);

export class AllocationBook {
  private bindings = new Map<string, string>();
  private readonly failures = new Map<string, AllocationFailure>();
  private readonly file: JsonStateFile | undefined;

  constructor(persist?: { file: string; logger: Logger }) {
    this.file = persist ? new JsonStateFile(persist.file, persist.logger, 'allocation state') : undefined;
  }

  /** Reads what an earlier run left; an unreadable file is logged and ignored (labels still bind, adoption runs again). */
  async load(): Promise<void> {
    const parsed = (await this.file?.read()) as Partial<Saved> | null | undefined;
    if (!parsed || typeof parsed !== 'object') return;
    for (const [allocationId, containerId] of Object.entries(parsed.bindings ?? {})) {
      if (typeof containerId === 'string') this.bindings.set(allocationId, containerId);
    }
    for (const f of Array.isArray(parsed.failures) ? (parsed.failures as Partial<AllocationFailure>[]) : []) {
      if (isFailure(f)) this.failures.set(failedKey(f.allocationId, f.deploymentId), f);
    }
  }

  boundView(): ReadonlyMap<string, string> {
    return this.bindings;
  }

  failedView(): ReadonlySet<string> {
    return new Set(this.failures.keys());
  }

  failure(allocationId: string, deploymentId: string): AllocationFailure | undefined {
    return this.failures.get(failedKey(allocationId, deploymentId));
  }

  /**
   * After a plan: the bindings it made, and only the failures of allocations still on the release that
   * failed (a set that moved the allocation to another release, or removed it, forgets the failure).
   * Written only when something changed; resolves once on disk.
   */
  settle(bindings: ReadonlyMap<string, string>, targets: ReadonlyMap<string, string>): Promise<void> {
    let changed = !sameEntries(this.bindings, bindings);
    this.bindings = new Map(bindings);
    for (const [key, f] of this.failures) {
      if (targets.get(f.allocationId) === f.deploymentId) continue;
      this.failures.delete(key);
      changed = true;
    }
    return changed ? this.save() : (this.file?.flushed() ?? Promise.resolve());
  }

  recordFailure(failure: AllocationFailure): Promise<void> {
    this.failures.set(failedKey(failure.allocationId, failure.deploymentId), failure);
    return this.save();
  }

  private save(): Promise<void> {
    const saved: Saved = { bindings: Object.fromEntries(this.bindings), failures: [...this.failures.values()] };
    return this.file?.write({ version: 1, ...saved }) ?? Promise.resolve();
  }
}

function sameEntries(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): boolean {
  return a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
}

/** The bindings once one service's converge settled: the other services' as booked (of allocations still listed), this one's as it left them. */
export function mergedBindings(booked: ReadonlyMap<string, string>, allocations: readonly Allocation[], serviceId: string, bindings: ReadonlyMap<string, string>): Map<string, string> {
  const listed = new Set(allocations.map((a) => a.allocationId));
  const merged = new Map([...booked].filter(([allocationId]) => listed.has(allocationId)));
  for (const a of allocations.filter((x) => x.serviceId === serviceId)) {
    const id = bindings.get(a.allocationId);
    if (id) merged.set(a.allocationId, id);
    else merged.delete(a.allocationId);
  }
  return merged;
}
