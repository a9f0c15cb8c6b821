import type { RoutingStatus, Workload } from '@tether/protocol';
import type { DeployOutcome, Observation, RoutingApplyResult, RoutingController, RoutingMapInput, WorkloadController } from './controllers.js';

// The controllers for TETHER_RUNTIME=none and TETHER_PROXY=none: an agent that
// keeps a session (and its truthful status) without running containers or a
// proxy. They say what they are instead of pretending.

export class UnavailableWorkloads implements WorkloadController {
  constructor(private readonly why = 'no container runtime configured (TETHER_RUNTIME=none)') {}
  async start(): Promise<void> {}
  async stop(): Promise<void> {}
  async observe(): Promise<Observation> {
    return { containers: [], runtime: { available: false, error: this.why } };
  }
  setDesired(_workloads: Workload[]): void {}
  async deploy(_workload: Workload): Promise<DeployOutcome> {
    return { status: 'failed', code: 'RUNTIME_UNAVAILABLE', reason: this.why };
  }
}

export class DisabledRouting implements RoutingController {
  private readonly current: RoutingStatus = { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null };
  constructor(private readonly why = 'no proxy configured (TETHER_PROXY=none)') {}
  async start(): Promise<void> {}
  async stop(): Promise<void> {}
  async apply(map: RoutingMapInput): Promise<RoutingApplyResult> {
    return { hash: map.hash, changed: false, reloaded: false, error: this.why, routing: this.status() };
  }
  status(): RoutingStatus {
    return { ...this.current };
  }
}
