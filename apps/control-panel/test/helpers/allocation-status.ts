import type { AllocationStatus } from '@tether/protocol';

/** An allocations.status entry as an agent sends it: running and healthy on its release unless `patch` says otherwise. */
export const allocationStatus = (allocationId: string, serviceId: string, deploymentId: string, patch: Partial<AllocationStatus> = {}): AllocationStatus => ({
  allocationId,
  serviceId,
  deploymentId,
  runningDeploymentId: deploymentId,
  state: 'running',
  containerId: `c${allocationId.slice(-8)}`,
  health: 'healthy',
  code: null,
  reason: null,
  since: '2026-12-04T20:00:00.000Z',
  ...patch,
});
