import { rollsOutWithoutOverlap, type Workload } from '@tether/protocol';
import type { AllocationRollout } from './allocation-plan.js';
import { rolloutWithoutOverlap } from './exclusive-rollout.js';
import { failed, prepare, rollout, type ExecutorDeps, type RolloutResult } from './executor.js';
import { allocationContainerSpec } from './workload-spec.js';

// One rollout of planAllocations (the allocations of one service moving to one release) carried out by the
// deploy path's own rollout: every new container made with allocationContainerSpec, started beside the old
// ones, ready (and through its health check) before any old one is switched away, drained and removed; with
// a writable volume or a fenced release the old ones stop first (exclusive-rollout.ts). On failure the new containers are removed
// and the old ones never stopped serving.

export async function rollAllocations(deps: ExecutorDeps, plan: AllocationRollout, onStarting: () => void): Promise<RolloutResult> {
  const workload: Workload = { ...plan.release, replicas: plan.allocations.length };
  const old = plan.allocations.flatMap((a) => (a.retire ? [a.retire] : []));
  const specs = plan.allocations.map((a) => allocationContainerSpec(deps.node, deps.network, plan.release, a.allocationId, deps.privateAddress ?? null));
  try {
    // The image first (`pending` while it is pulled); rollout() finds it present then.
    await prepare(deps, workload);
  } catch (err) {
    deps.logger.warn({ deploymentId: workload.deploymentId, err }, 'allocation rollout failed before it started; the running containers stay');
    return { outcome: failed(err), superseded: [], cleanup: Promise.resolve() };
  }
  onStarting();
  const overlap = !rollsOutWithoutOverlap(workload);
  const action = { kind: 'replace' as const, serviceId: plan.serviceId, workload, replicas: [], keep: [], retire: old, overlap };
  return old.length > 0 && !overlap ? rolloutWithoutOverlap(deps, action, specs) : rollout(deps, action, specs);
}
