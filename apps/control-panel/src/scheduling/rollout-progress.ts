import { sanitizeText, truncate } from '@tether/common';
import { containerReady } from '../node-health/container-verdict.js';
import { planRollout, type RolloutOptions } from './rollout-plan.js';
import { compareText } from './order.js';
import type { Allocation, NodeView, ServiceSpec } from './types.js';

// Where a managed service's release rollout stands, decided from the
// allocations' reported status alone (issue 36). Pure: the scheduler loop
// reads the rows, writes what this returns under its epoch, and keeps the two
// clocks it needs (when each allocation was moved, when each rollout last
// made progress). A step moves allocations' release to the target in place, so
// every node runs today's health-gated, drained rollout for its replica; the
// next step starts only once every allocation on the target runs it healthy.

/** An allocation as its node last reported it (allocations.status, stored without its ids). */
export interface ReportedStatus {
  state: 'pending' | 'starting' | 'running' | 'failed' | 'draining' | 'removed' | string;
  runningDeploymentId?: string | null;
  /** Present when ingestion keeps the release the report was for; then it decides whether a failure is the target's. */
  deploymentId?: string;
  health?: string;
  code?: string | null;
  reason?: string | null;
  imageRef?: string;
}

export interface RolloutAllocation {
  id: string;
  nodeId: string;
  /** null: the service had no release when it was placed. */
  releaseId: string | null;
  createdAt: number;
  status: ReportedStatus | null;
  /** When the status was written (epoch ms); null: never reported. */
  statusAt: number | null;
}

export interface TargetRelease {
  id: string;
  /** pending or delivered: rolling out; running: done. */
  status: string;
  createdAt: number;
  dispatchedAt: number | null;
  /** Its reason now (a progress reason is written only when it changes). */
  reason: string | null;
}

export interface RolloutInput {
  service: ServiceSpec;
  /** The service's allocations that run after this evaluation's placements and stops. */
  allocations: readonly RolloutAllocation[];
  /** How many replicas the service should run (wantedReplicas). */
  wanted: number;
  target: TargetRelease;
  /** The release to go back to when the target fails (the service's running deployment), or null. */
  previous: string | null;
  nodes: ReadonlyMap<string, NodeView>;
  now: number;
  progressDeadlineMs: number;
  /** When each allocation was last moved to the target (or placed on it) by this panel; else the rollout's start. */
  movedAt: ReadonlyMap<string, number>;
  /** When the rollout last made progress (on this panel); else the rollout's start. */
  progressAt: number | undefined;
  options?: RolloutOptions;
}

export type RolloutDecision =
  | { kind: 'none' }
  | { kind: 'wait'; reason: string }
  | { kind: 'step'; allocationIds: string[]; reason: string }
  | { kind: 'running'; reason: string; imageRef: string | null }
  | { kind: 'failed'; reason: string; revert: { allocationIds: string[]; to: string | null } };

/** The allocation runs `releaseId` in a serving container that passed (or has no) health check. */
export function runsHealthy(status: ReportedStatus | null, releaseId: string): boolean {
  if (!status || status.state !== 'running' || status.runningDeploymentId !== releaseId) return false;
  return containerReady({ state: 'running', health: (status.health ?? 'none') as 'none' | 'starting' | 'healthy' | 'unhealthy' });
}

/** A failure reported for the target: the report names it, or (reports without it) came after the move. */
export function failedOnTarget(a: RolloutAllocation, target: TargetRelease, movedAt: number): boolean {
  if (a.status?.state !== 'failed') return false;
  if (a.status.deploymentId !== undefined) return a.status.deploymentId === target.id;
  return (a.statusAt ?? 0) > movedAt;
}

const duration = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`);
const nodeName = (nodes: ReadonlyMap<string, NodeView>, id: string) => nodes.get(id)?.name ?? id;
const clip = (text: string) => truncate(sanitizeText(text), 1000);

export function decideRollout(input: RolloutInput): RolloutDecision {
  const { target, allocations, nodes } = input;
  const start = target.dispatchedAt ?? target.createdAt;
  const onTarget = allocations.filter((a) => a.releaseId === target.id);
  const stale = allocations.filter((a) => a.releaseId !== target.id);
  const done = target.status === 'running';

  if (!done) {
    const failed = onTarget.filter((a) => failedOnTarget(a, target, input.movedAt.get(a.id) ?? start));
    if (failed.length > 0) {
      const why = failed
        .sort((a, b) => compareText(nodeName(nodes, a.nodeId), nodeName(nodes, b.nodeId)))
        .map((a) => `${a.status?.code ? `${a.status.code}: ` : ''}${a.status?.reason ?? 'failed'} (on node ${nodeName(nodes, a.nodeId)})`);
      const back = input.previous ? `release ${input.previous}` : 'no release (the service had none running)';
      // The agent's "CODE: reason" first, as on the single-node path, then the node that reported it.
      return {
        kind: 'failed',
        reason: clip(`${why.join('; ')}; every replica moved to it goes back to ${back}`),
        revert: { allocationIds: onTarget.map((a) => a.id), to: input.previous },
      };
    }
  }

  const notReady = onTarget.filter((a) => !runsHealthy(a.status, target.id));
  const missing = Math.max(0, input.wanted - allocations.length);
  if (notReady.length > 0 || (missing > 0 && !done)) {
    if (done) return { kind: 'none' };
    const since = input.progressAt ?? start;
    if (input.now - since > input.progressDeadlineMs) {
      const names = notReady
        .map((a) => {
          const node = nodes.get(a.nodeId);
          const name = nodeName(nodes, a.nodeId);
          if (!node || node.state !== 'live') return `node ${name} unreachable`;
          return `node ${name} not running it healthy (${a.status ? `state ${a.status.state}, health ${a.status.health ?? 'none'}` : 'no status reported'})`;
        })
        .sort(compareText);
      if (missing > 0) names.push(`${missing} replica${missing === 1 ? '' : 's'} with no node to run on`);
      const back = input.previous ? `release ${input.previous}` : 'no release (the service had none running)';
      return {
        kind: 'failed',
        reason: clip(`PROGRESS_DEADLINE_EXCEEDED: no progress for ${duration(input.progressDeadlineMs)}: ${names.join('; ')}; every replica moved to it goes back to ${back}`),
        revert: { allocationIds: onTarget.map((a) => a.id), to: input.previous },
      };
    }
    return { kind: 'wait', reason: progressReason(onTarget.length - notReady.length, input.wanted) };
  }

  if (stale.length > 0) {
    // Allocations without a release run nothing: nothing of the service is up to keep, so all move at once.
    const empty = stale.filter((a) => a.releaseId === null);
    let ids: string[];
    if (empty.length > 0) ids = empty.map((a) => a.id);
    else {
      const asAllocations: Allocation[] = stale.map((a) => ({
        id: a.id,
        serviceId: input.service.id,
        nodeId: a.nodeId,
        releaseId: a.releaseId ?? '',
        createdAt: a.createdAt,
        desired: 'run',
      }));
      const plan = planRollout(input.service, [...nodes.values()], asAllocations, input.options);
      ids = (plan.steps[0] ?? []).map((r) => r.allocationId);
    }
    return { kind: 'step', allocationIds: ids, reason: progressReason(onTarget.length, input.wanted) };
  }

  if (done) return { kind: 'none' };
  const names = [...new Set(onTarget.map((a) => nodeName(nodes, a.nodeId)))].sort(compareText);
  const imageRef = onTarget.map((a) => a.status?.imageRef).find((r): r is string => typeof r === 'string') ?? null;
  return {
    kind: 'running',
    reason: onTarget.length === 0 ? 'running: the service runs 0 replicas' : `running: ${onTarget.length} of ${input.wanted} replicas run it healthy on ${names.join(', ')}`,
    imageRef,
  };
}

export function progressReason(ready: number, wanted: number): string {
  return `rolling out across nodes: ${ready} of ${wanted} replicas run this release healthy`;
}
