import { CAPABILITIES } from '@tether/protocol';

// The optional workload fields the Docker workload controller carries out, as hello announces them
// (connection/handshake.ts adds what the session itself carries: workload.fence, logs, …).

export function workloadCapabilities(o: { volumeInventory: boolean }): readonly string[] {
  return [
    CAPABILITIES.WORKLOAD_COMMAND,
    CAPABILITIES.WORKLOAD_RESOURCES,
    CAPABILITIES.WORKLOAD_VOLUMES,
    CAPABILITIES.WORKLOAD_HEALTH_CHECK,
    CAPABILITIES.WORKLOAD_DRAIN,
    CAPABILITIES.REGISTRY_AUTH,
    CAPABILITIES.WORKLOAD_ALLOCATIONS,
    // An allocation rollout's drain is reported (allocations.drained): beside workload.allocations and workload.drain only.
    CAPABILITIES.ALLOCATIONS_DRAIN,
    // Carried out by rollsOutWithoutOverlap in both rollouts (plan.ts, allocation-rollout.ts).
    CAPABILITIES.WORKLOAD_STOP_FIRST,
    // workload.fence is announced by the session (handshake.ts) with the fence's timing, over setFenced.
    ...(o.volumeInventory ? [CAPABILITIES.VOLUMES_INVENTORY] : []),
  ];
}
