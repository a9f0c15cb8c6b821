import { rollsOutWithoutOverlap, type Workload } from '@tether/protocol';
import type { Logger } from '@tether/common';
import type { AllocationBook } from './allocation-book.js';
import type { AllocationRollout } from './allocation-plan.js';
import type { AllocationReport } from './allocation-report.js';
import type { Drainer } from './drainer.js';
import { isDeploymentFault } from './errors.js';
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
  const ids = plan.allocations.map((a) => a.allocationId);
  return old.length > 0 && !overlap ? rolloutWithoutOverlap(deps, action, specs) : rollout(deps, action, specs, ids);
}

/**
 * One rollout of the allocation executor, booked: its allocations `pending` (image pulled), then `starting` in the
 * report; a release's fault recorded as each allocation's failure (not Docker's: the next pass tries again); the
 * old containers' drain followed.
 */
export async function rollAndRecord(
  deps: ExecutorDeps,
  rollout: AllocationRollout,
  o: { report: AllocationReport; book: Pick<AllocationBook, 'recordFailure'>; drainer: Drainer; logger: Logger },
): Promise<void> {
  const { release } = rollout;
  const mark = (state: 'pending' | 'starting') => {
    for (const a of rollout.allocations) o.report.rolling.set(a.allocationId, state);
    o.report.update();
  };
  mark('pending');
  const result = await rollAllocations(deps, rollout, () => mark('starting'));
  const { outcome } = result;
  // Its drain is reported (allocations.drained): followed to its end, or 0 and 0 now when nothing overlapped.
  if (result.drain) o.drainer.follow(result.drain);
  else if (outcome.status === 'running' && release.drainSeconds !== undefined) o.drainer.reportNothing(release.deploymentId, rollout.allocations.map((a) => a.allocationId));
  if (outcome.status === 'failed') {
    // Not the release's fault (Docker away, a daemon error): the next pass tries again.
    if (isDeploymentFault(outcome.code)) {
      for (const a of rollout.allocations) {
        await o.book.recordFailure({ allocationId: a.allocationId, deploymentId: release.deploymentId, code: outcome.code, reason: outcome.reason, at: Date.now() });
      }
    }
    o.logger.warn({ deploymentId: release.deploymentId, code: outcome.code, reason: outcome.reason }, 'allocation rollout failed');
  } else {
    o.logger.info({ deploymentId: release.deploymentId, allocations: rollout.allocations.map((a) => a.allocationId), reason: outcome.reason }, 'allocations rolled out');
  }
  o.report.update();
  await result.cleanup;
}
