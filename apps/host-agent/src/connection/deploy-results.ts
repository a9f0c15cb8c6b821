import type { DeployResult } from '@tether/protocol';

/**
 * Results waiting for a session to carry them: a deploy.result is never
 * dropped because the socket was. Bounded (the oldest go first past the
 * limit): results are idempotent on the panel, and a deployment the agent
 * never reports ends by the panel's own rules.
 */
export class DeployResultQueue {
  private readonly waiting: DeployResult[] = [];

  constructor(private readonly limit = 1_000) {}

  get size(): number {
    return this.waiting.length;
  }

  hold(result: DeployResult): void {
    this.waiting.push(result);
    if (this.waiting.length > this.limit) this.waiting.shift();
  }

  /** Sends every held result, in order, on a session that just became ready. */
  drain(send: (result: DeployResult) => void): void {
    for (const result of this.waiting.splice(0)) send(result);
  }
}
