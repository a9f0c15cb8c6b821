import { Allocations as AllocationsSchema, workloadCapabilities, type Allocations, type Capability, type Release, type Workload } from '@tether/protocol';
import type { DesiredWorkload } from './desired-workloads.js';

// A node's `allocations` frame (capability `workload.allocations`), built from
// its desired set (desiredWorkloads) and the spec of each release: the only
// intent an agent that speaks the capability receives. Pure: the caller reads
// releases and the session's capabilities, and sends the frame.

/** Why an allocation is not in its node's frame (the panel shows it on the replica; the set stays sendable). */
export type LeftOutReason = 'RELEASE_UNKNOWN' | 'AGENT_LACKS_CAPABILITY' | 'NODE_ALLOCATION_LIMIT';

export interface LeftOutAllocation {
  allocationId: string;
  serviceId: string;
  releaseId: string;
  reason: LeftOutReason;
  /** AGENT_LACKS_CAPABILITY: what the release needs that the agent did not name. */
  missing?: Capability[];
}

export interface AllocationsFrameResult {
  frame: Omit<Allocations, 'id'>;
  leftOut: LeftOutAllocation[];
}

/** The most allocations one frame carries (the schema's bound, which the agent's status report shares). */
export const MAX_FRAME_ALLOCATIONS = (AllocationsSchema.properties.allocations as { maxItems?: number }).maxItems ?? 2_000;

/**
 * The frame for one node. `releases` maps a release id (a deployment id) to the workload spec its deployment
 * recorded; an allocation whose release is missing, belongs to another service, or needs a capability the
 * agent did not name is left out with its reason (the release is then not sent either, so no secret or
 * registry password reaches an agent that would ignore it). The order of `desired` is kept.
 */
export function allocationsFrame(
  desired: readonly DesiredWorkload[],
  releases: ReadonlyMap<string, Workload | Release>,
  agentCapabilities: ReadonlySet<string>,
): AllocationsFrameResult {
  const sent = new Map<string, Release>();
  const allocations: Allocations['allocations'] = [];
  const leftOut: LeftOutAllocation[] = [];
  for (const d of desired) {
    const spec = releases.get(d.releaseId);
    const base = { allocationId: d.allocationId, serviceId: d.serviceId, releaseId: d.releaseId };
    if (!spec || spec.serviceId !== d.serviceId || spec.deploymentId !== d.releaseId) {
      leftOut.push({ ...base, reason: 'RELEASE_UNKNOWN' });
      continue;
    }
    const missing = workloadCapabilities(spec).filter((c) => !agentCapabilities.has(c));
    if (missing.length > 0) {
      leftOut.push({ ...base, reason: 'AGENT_LACKS_CAPABILITY', missing });
      continue;
    }
    if (allocations.length >= MAX_FRAME_ALLOCATIONS) {
      leftOut.push({ ...base, reason: 'NODE_ALLOCATION_LIMIT' });
      continue;
    }
    if (!sent.has(d.releaseId)) sent.set(d.releaseId, releaseOf(spec));
    allocations.push({ allocationId: d.allocationId, serviceId: d.serviceId, deploymentId: d.releaseId });
  }
  return { frame: { type: 'allocations', releases: [...sent.values()], allocations }, leftOut };
}

/** A deployment's workload without `replicas`: the allocations say how many run, and where. */
export function releaseOf(spec: Workload | Release): Release {
  if (!('replicas' in spec)) return spec;
  const { replicas: _replicas, ...release } = spec;
  return release;
}
