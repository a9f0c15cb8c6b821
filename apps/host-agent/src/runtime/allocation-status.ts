import type { Allocation, AllocationState, AllocationStatus } from '@tether/protocol';
import type { AllocatedContainer } from './allocation-plan.js';
import type { AllocationFailure } from './allocation-book.js';

// Every allocation as `allocations.status` reports it, from what the agent
// knows after a plan: pure, so the report's rules are table tests.

export interface AllocationStatusInput {
  allocations: readonly Allocation[];
  containers: readonly AllocatedContainer[];
  /** Allocation id → the container serving it (planAllocations' bindings). */
  bindings: ReadonlyMap<string, string>;
  failure: (allocationId: string, deploymentId: string) => AllocationFailure | undefined;
  /** Allocations whose rollout is under way: `starting` once its new container runs, `pending` before. */
  rolling: ReadonlyMap<string, 'pending' | 'starting'>;
  /** Containers of removed allocations still draining, with the allocation each served. */
  draining: readonly { allocationId: string; container: AllocatedContainer }[];
  /** Checked health of a container (the health check's verdict), when it has one. */
  health: (container: AllocatedContainer) => AllocationStatus['health'];
  /** Pinned image per release, once known. */
  imageRefs: ReadonlyMap<string, string>;
  /**
   * Where a running container's port is published on the node's private address (routing.remote), null when it is
   * not; absent: the node publishes nothing and no entry carries `endpoint`.
   */
  endpoint?: (container: AllocatedContainer) => string | null;
  /** The last report, so `since` moves only when the state does. */
  previous: ReadonlyMap<string, AllocationStatus>;
  now: string;
}

export function allocationStatuses(input: AllocationStatusInput): AllocationStatus[] {
  const byId = new Map(input.containers.map((c) => [c.id, c]));
  const out: AllocationStatus[] = [];
  const entry = (allocationId: string, serviceId: string, deploymentId: string, state: AllocationState, c: AllocatedContainer | null, fail?: AllocationFailure): AllocationStatus => {
    const prev = input.previous.get(allocationId);
    const imageRef = c ? input.imageRefs.get(c.deploymentId) : undefined;
    return {
      allocationId,
      serviceId,
      deploymentId,
      runningDeploymentId: c?.deploymentId ?? null,
      state,
      containerId: c?.id ?? null,
      health: c ? input.health(c) : 'none',
      code: fail?.code ?? null,
      reason: fail?.reason ?? null,
      ...(imageRef ? { imageRef } : {}),
      // A draining container takes no new requests: other nodes must not be sent to it either.
      ...(input.endpoint ? { endpoint: c && c.state === 'running' && state !== 'draining' ? input.endpoint(c) : null } : {}),
      since: prev && prev.state === state && prev.deploymentId === deploymentId ? prev.since : input.now,
    };
  };
  for (const a of input.allocations) {
    const c = byId.get(input.bindings.get(a.allocationId) ?? '') ?? null;
    const fail = input.failure(a.allocationId, a.deploymentId);
    const rolling = input.rolling.get(a.allocationId);
    const state: AllocationState = fail ? 'failed' : rolling ?? (c && c.deploymentId === a.deploymentId && c.state === 'running' ? 'running' : 'pending');
    out.push(entry(a.allocationId, a.serviceId, a.deploymentId, state, c, fail));
  }
  const listed = new Set(input.allocations.map((a) => a.allocationId));
  for (const { allocationId, container } of input.draining) {
    if (listed.has(allocationId)) continue;
    listed.add(allocationId);
    out.push(entry(allocationId, container.serviceId, container.deploymentId, 'draining', container));
  }
  return out;
}
