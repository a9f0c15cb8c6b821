import type { Allocation, Release } from '@tether/protocol';
import type { ActualContainer } from './plan.js';

// The node's allocations set (capability workload.allocations) against what
// runs, as a pure function: which container each allocation owns (adopting
// containers placed before allocations existed, so an upgrade restarts
// nothing), which allocations roll to a new release (grouped per service and
// release: one health-gated, drained rollout each, as a deploy is), and which
// containers no allocation owns (drained, then removed).

/** A service container as plan.ts sees it; `allocationId` is its `tether.allocation` label (absent: placed by deploy/workloads). */
export type AllocatedContainer = ActualContainer;

export interface AllocationPlanInput {
  allocations: readonly Allocation[];
  releases: ReadonlyMap<string, Release>;
  containers: readonly AllocatedContainer[];
  /** Adoptions recorded earlier (allocation id → container id): an adopted container carries no label. */
  bindings: ReadonlyMap<string, string>;
  /** `${allocationId}:${deploymentId}` pairs whose rollout failed here: not tried again until the set changes the release. */
  failed: ReadonlySet<string>;
  /** Containers draining now (already on their way out). */
  draining: ReadonlySet<string>;
}

/** New containers for `allocations` on `release`; each replaces its `retire` (null: nothing to replace) once all are ready. */
export interface AllocationRollout {
  serviceId: string;
  release: Release;
  allocations: { allocationId: string; retire: AllocatedContainer | null }[];
}

export interface AllocationPlan {
  /** Allocation id → the container that serves it now (adoptions included); absent: none. */
  bindings: Map<string, string>;
  rollouts: AllocationRollout[];
  /** Containers no allocation owns: drain, then stop and remove. */
  retire: AllocatedContainer[];
  /** Allocations whose release failed here and is not retried (their previous container, if any, keeps serving). */
  failed: string[];
}

export const failedKey = (allocationId: string, deploymentId: string): string => `${allocationId}:${deploymentId}`;

const usable = (c: AllocatedContainer) => c.state !== 'removing' && c.state !== 'dead';

export function planAllocations(input: AllocationPlanInput): AllocationPlan {
  const live = input.containers.filter((c) => usable(c) && !input.draining.has(c.id));
  const byId = new Map(live.map((c) => [c.id, c]));
  const taken = new Set<string>();
  const bindings = new Map<string, string>();
  const bind = (allocationId: string, c: AllocatedContainer) => {
    bindings.set(allocationId, c.id);
    taken.add(c.id);
  };

  // 1. Its own label, or an adoption recorded earlier: the same container as before a restart.
  for (const a of input.allocations) {
    const labelled = live.filter((c) => c.allocationId === a.allocationId).sort(preferServing(a.deploymentId));
    const recorded = byId.get(input.bindings.get(a.allocationId) ?? '');
    const own = labelled[0] ?? (recorded && recorded.allocationId === undefined && recorded.serviceId === a.serviceId && !taken.has(recorded.id) ? recorded : undefined);
    if (own) bind(a.allocationId, own);
  }
  // 2. Adoption: an unlabelled container of the service, its release first, oldest first, so nothing restarts.
  for (const a of input.allocations) {
    if (bindings.has(a.allocationId)) continue;
    const candidates = live
      .filter((c) => c.allocationId === undefined && c.serviceId === a.serviceId && !taken.has(c.id))
      .sort((x, y) => Number(y.deploymentId === a.deploymentId) - Number(x.deploymentId === a.deploymentId) || compareCreated(x, y));
    if (candidates[0]) bind(a.allocationId, candidates[0]);
  }

  const groups = new Map<string, AllocationRollout>();
  const failed: string[] = [];
  for (const a of input.allocations) {
    const current = byId.get(bindings.get(a.allocationId) ?? '') ?? null;
    if (current && current.deploymentId === a.deploymentId) continue;
    if (input.failed.has(failedKey(a.allocationId, a.deploymentId))) {
      failed.push(a.allocationId);
      continue;
    }
    const release = input.releases.get(a.deploymentId);
    if (!release) continue; // the frame's own check makes this unreachable
    const key = `${a.serviceId}\u0000${a.deploymentId}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { serviceId: a.serviceId, release, allocations: [] }));
    group.allocations.push({ allocationId: a.allocationId, retire: current });
  }
  // Every other container of an allocation (a stale one of a finished rollout) and every one no allocation owns.
  const retire = live.filter((c) => !taken.has(c.id)).sort(compareCreated);
  return { bindings, rollouts: [...groups.values()], retire, failed };
}

/** Of several containers with one allocation's label, the one running the target release serves; else the newest running. */
function preferServing(deploymentId: string) {
  return (x: AllocatedContainer, y: AllocatedContainer): number =>
    Number(y.deploymentId === deploymentId && y.state === 'running') - Number(x.deploymentId === deploymentId && x.state === 'running') ||
    Number(y.state === 'running') - Number(x.state === 'running') ||
    y.createdAt - x.createdAt;
}

/** Oldest container first, ties by id: the same order on every pass. */
function compareCreated(x: AllocatedContainer, y: AllocatedContainer): number {
  return x.createdAt - y.createdAt || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0);
}

/** Running containers whose allocation (by label, else by binding) the set no longer holds. */
export function disownedContainers(containers: readonly AllocatedContainer[], bindings: ReadonlyMap<string, string>, allocations: readonly Allocation[]): Set<string> {
  const listed = new Set(allocations.map((a) => a.allocationId));
  const boundTo = new Map([...bindings].map(([allocationId, containerId]) => [containerId, allocationId]));
  const disowned = new Set<string>();
  for (const c of containers) {
    const owner = c.allocationId ?? boundTo.get(c.id);
    if (c.state === 'running' && owner !== undefined && !listed.has(owner)) disowned.add(c.id);
  }
  return disowned;
}
