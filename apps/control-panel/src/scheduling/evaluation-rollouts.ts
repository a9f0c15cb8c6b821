import { decideRollout, type RolloutAllocation, type RolloutInput, type TargetRelease } from './rollout-progress.js';
import { rolloutLimits, rolloutOptionsOf, type RolloutOptions } from './rollout-plan.js';
import { wantedReplicas } from './schedule.js';
import type { DeploymentRow, EvaluationPlan, ServiceRow } from './evaluation-plan.js';
import type { ServiceSpec } from './types.js';

// Step 3 of an evaluation (evaluation.ts): a service with a target release
// (its newest deployment that is not final, else its running one) rolls out
// step by step (rollout-progress.ts decides), and the plan gets the release
// moves and the deployment's row as the decision says.

/** decideRollout's input as an evaluation has it (`progressDeadlineMs`: the panel's, which the service's replaces). */
export type RolloutStep = Omit<RolloutInput, 'service' | 'allocations' | 'wanted' | 'target' | 'options'> & {
  service: ServiceRow;
  spec: ServiceSpec;
  /** The run allocations the rollout counts: kept, adopted and placed now, none leaving. */
  runs: RolloutAllocation[];
  target: DeploymentRow;
};

/** One service's rollout now, added to the plan. */
export function stepRollout(plan: EvaluationPlan, args: RolloutStep): void {
  const { service, spec, runs, target } = args;
  const targetRelease: TargetRelease = { id: target.id, status: target.status, createdAt: target.createdAt, dispatchedAt: target.dispatchedAt, reason: target.reason };
  const decision = decideRollout({
    service: spec,
    allocations: runs,
    wanted: wantedReplicas(spec),
    target: targetRelease,
    previous: args.previous,
    nodes: args.nodes,
    now: args.now,
    progressDeadlineMs: service.rollout?.progressDeadlineSeconds ? service.rollout.progressDeadlineSeconds * 1000 : args.progressDeadlineMs,
    movedAt: args.movedAt,
    progressAt: args.progressAt,
    options: rolloutOptions(service, spec),
  });
  switch (decision.kind) {
    case 'step':
      plan.moves.push({ serviceId: service.id, releaseId: target.id, allocationIds: decision.allocationIds });
      plan.moved.push(...decision.allocationIds);
      plan.progressed.push(target.id);
      if (decision.reason !== target.reason) plan.deployments.push({ kind: 'progress', id: target.id, reason: decision.reason });
      break;
    case 'wait':
      if (decision.reason !== target.reason) plan.deployments.push({ kind: 'progress', id: target.id, reason: decision.reason });
      break;
    case 'running':
      plan.deployments.push({ kind: 'running', id: target.id, serviceId: service.id, reason: decision.reason, imageRef: decision.imageRef });
      break;
    case 'failed':
      plan.deployments.push({ kind: 'failed', id: target.id, reason: decision.reason });
      if (decision.revert.allocationIds.length > 0) plan.moves.push({ serviceId: service.id, releaseId: decision.revert.to, allocationIds: decision.revert.allocationIds });
      break;
    case 'none':
      break;
  }
}

/**
 * The limits a service's rollout runs with. The API refuses a `rollout` its volumes or fence cannot take
 * (domain/service-fields.ts checkRollout); a row that slipped past (written by hand) rolls out with the defaults
 * rather than stop every rollout of the evaluation.
 */
function rolloutOptions(service: ServiceRow, spec: ServiceSpec): RolloutOptions {
  if (!service.rollout) return {};
  const options = rolloutOptionsOf(service.rollout);
  try {
    rolloutLimits(spec, options);
    return options;
  } catch {
    return {};
  }
}
