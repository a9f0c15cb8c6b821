import type { AllocationsDrained, DeployDrained, DeployResult } from '@tether/protocol';

/**
 * What a deployment's outcome sends: its result, and later its drain (capability workload.drain), or the drain of an
 * allocation rollout (capability allocations.drain).
 */
export type DeploymentReport = DeployResult | DeployDrained | AllocationsDrained;

/**
 * Results waiting for a session to carry them: a deploy.result (or
 * deploy.drained, allocations.drained) is never dropped because the socket was. Bounded (the oldest go first past the
 * limit): results are idempotent on the panel, and a deployment the agent
 * never reports ends by the panel's own rules.
 */
export class DeployResultQueue {
  private readonly waiting: DeploymentReport[] = [];

  constructor(private readonly limit = 1_000) {}

  get size(): number {
    return this.waiting.length;
  }

  hold(result: DeploymentReport): void {
    this.waiting.push(result);
    if (this.waiting.length > this.limit) this.waiting.shift();
  }

  /** Sends every held result, in order, on a session that just became ready. */
  drain(send: (result: DeploymentReport) => void): void {
    for (const result of this.waiting.splice(0)) send(result);
  }
}
