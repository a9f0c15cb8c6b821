import { AppError } from '../errors.js';
import type { Allocation, NodeView, ServiceSpec } from './types.js';
import { compareText } from './order.js';

// A release rolled out across nodes, as steps (issue 36). Each replacement
// starts the new release on the node of the replica it replaces, so every
// node keeps running today's health-gated, drained rollout for its replicas.
// A step holds at most maxSurge + maxUnavailable replacements: maxUnavailable
// of them stop the old replica first, the others start the new one first and
// drain the old once it is healthy. The next step starts only when every new
// replica of the step is healthy, so at most maxSurge replicas run above the
// wanted count and at most maxUnavailable below it.

/** A service's rollout settings (issue 36: `rollout` on the service, null columns left out): absent, the defaults. */
export interface RolloutOptions {
  maxSurge?: number;
  maxUnavailable?: number;
}

/** The limits a service was given, as stored (null: the default, left out). */
export function rolloutOptionsOf(rollout: { maxSurge: number | null; maxUnavailable: number | null }): RolloutOptions {
  return { ...(rollout.maxSurge === null ? {} : { maxSurge: rollout.maxSurge }), ...(rollout.maxUnavailable === null ? {} : { maxUnavailable: rollout.maxUnavailable }) };
}

export interface Replacement {
  allocationId: string;
  nodeId: string;
  fromRelease: string;
  toRelease: string;
  order: 'start-first' | 'stop-first';
}

export interface RolloutPlan {
  maxSurge: number;
  maxUnavailable: number;
  steps: Replacement[][];
}

/**
 * Defaults: 1 and 0 (health-gated, never below the wanted count); a service
 * with a writable volume cannot run two containers on its data, and a fenced
 * one (failover.fence) must never run twice, so 0 and 1. The one check of a
 * service's `rollout` against its volumes and fence: the API runs it on every
 * write (domain/service-fields.ts checkRollout), the scheduler on every plan.
 */
export function rolloutLimits(service: Pick<ServiceSpec, 'stateful' | 'fenced'>, options: RolloutOptions = {}): { maxSurge: number; maxUnavailable: number } {
  const exclusive = service.stateful || service.fenced === true;
  const maxSurge = options.maxSurge ?? (exclusive ? 0 : 1);
  const maxUnavailable = options.maxUnavailable ?? (exclusive ? 1 : 0);
  for (const [field, value] of [['maxSurge', maxSurge], ['maxUnavailable', maxUnavailable]] as const) {
    if (!Number.isInteger(value) || value < 0 || value > 100) {
      throw new AppError('VALIDATION_FAILED', `rollout.${field} is a whole number of replicas from 0 to 100`, { field: `rollout.${field}` });
    }
  }
  if (maxSurge + maxUnavailable === 0) {
    const field = options.maxSurge === undefined ? 'rollout.maxUnavailable' : 'rollout.maxSurge';
    throw new AppError('VALIDATION_FAILED', 'rollout.maxSurge and rollout.maxUnavailable cannot both be 0 (a field left out is its default): no replica could ever be replaced', { field });
  }
  if (service.stateful && maxSurge > 0) {
    throw new AppError('VALIDATION_FAILED', `a service with a writable volume rolls out with maxSurge 0: two containers never share its data (rollout.maxSurge ${maxSurge} asks for a surge)`, { field: 'rollout.maxSurge' });
  }
  if (service.fenced === true && maxSurge > 0) {
    throw new AppError('VALIDATION_FAILED', `a fenced service rolls out with maxSurge 0: two copies never run at once (rollout.maxSurge ${maxSurge} asks for a surge)`, { field: 'rollout.maxSurge' });
  }
  return { maxSurge, maxUnavailable };
}

export function planRollout(
  service: ServiceSpec,
  nodes: readonly NodeView[],
  allocations: readonly Allocation[],
  options: RolloutOptions = {},
): RolloutPlan {
  const { maxSurge, maxUnavailable } = rolloutLimits(service, options);
  const nameOf = new Map(nodes.map((node) => [node.id, node.name]));
  // Node by node (by name), oldest replica first, so a node finishes before the next starts.
  const stale = allocations
    .filter((a) => a.serviceId === service.id && a.desired === 'run' && a.releaseId !== service.releaseId)
    .sort((a, b) => compareText(nameOf.get(a.nodeId) ?? a.nodeId, nameOf.get(b.nodeId) ?? b.nodeId) || a.createdAt - b.createdAt || compareText(a.id, b.id));
  const batch = maxSurge + maxUnavailable;
  const steps: Replacement[][] = [];
  for (let start = 0; start < stale.length; start += batch) {
    steps.push(
      stale.slice(start, start + batch).map((a, i) => ({
        allocationId: a.id,
        nodeId: a.nodeId,
        fromRelease: a.releaseId,
        toRelease: service.releaseId,
        order: i < maxUnavailable ? 'stop-first' : 'start-first',
      })),
    );
  }
  return { maxSurge, maxUnavailable, steps };
}
