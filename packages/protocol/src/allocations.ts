import type { Allocations, Release } from './messages.js';

/**
 * What the schema cannot say about an `allocations` set, or null when it holds: release and allocation ids are
 * unique, and every allocation names a release of the frame for its own service. Checked at decode and encode
 * (INVALID_FIELD), so an agent never holds an allocation it cannot run.
 */
export function allocationsProblem(frame: Pick<Allocations, 'releases' | 'allocations'>): string | null {
  const releases = new Map<string, Release>();
  for (const [i, release] of frame.releases.entries()) {
    if (releases.has(release.deploymentId)) return `/releases/${i}: release ${release.deploymentId} is listed twice`;
    releases.set(release.deploymentId, release);
  }
  const seen = new Set<string>();
  for (const [i, allocation] of frame.allocations.entries()) {
    if (seen.has(allocation.allocationId)) return `/allocations/${i}: allocation ${allocation.allocationId} is listed twice`;
    seen.add(allocation.allocationId);
    const release = releases.get(allocation.deploymentId);
    if (!release) return `/allocations/${i}: release ${allocation.deploymentId} is not in releases`;
    if (release.serviceId !== allocation.serviceId) return `/allocations/${i}: release ${allocation.deploymentId} belongs to service ${release.serviceId}, not ${allocation.serviceId}`;
  }
  return null;
}
