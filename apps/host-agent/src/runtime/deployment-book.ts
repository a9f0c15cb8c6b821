import { backoffDelay, errorMessage, truncate } from '@tether/common';
import { FIELD_LIMITS } from '@tether/protocol';
import type { DeployOutcome } from '../controllers.js';
import { RUNTIME_ERROR_CODES, RuntimeError, isDeploymentFault } from './errors.js';
import { BoundedMap } from './bounded-map.js';

// What the agent knows about deployments beyond the containers: answers in
// flight (so a second delivery joins the first), final answers (so a
// redelivery gets the same one), deployments never to roll out again, and
// retry delays after transient failures. Bounded: the oldest are forgotten.

interface Pending {
  promise: Promise<DeployOutcome>;
  resolve(outcome: DeployOutcome): void;
}

export const failure = (code: string, reason: string): DeployOutcome => ({ status: 'failed', code, reason });

export const outcomeOf = (err: unknown): DeployOutcome =>
  failure(err instanceof RuntimeError ? err.code : RUNTIME_ERROR_CODES.DOCKER_ERROR, truncate(errorMessage(err), FIELD_LIMITS.text));

const MEMORY = 1_000;
/** First retry delay after a transient rollout failure; it doubles per attempt up to the caller's bound. */
const RETRY_INITIAL_MS = 1_000;

export class DeploymentBook {
  private readonly inflight = new Map<string, Pending>();
  private readonly finished = new BoundedMap<string, DeployOutcome>(MEMORY);
  private readonly heldIds = new BoundedMap<string, true>(MEMORY);
  private readonly cooldown = new BoundedMap<string, { until: number; attempts: number }>(MEMORY);

  /** The answer a delivery of `id` gets without new work: the one in flight, or the final one. */
  existing(id: string): Promise<DeployOutcome> | undefined {
    const finished = this.finished.get(id);
    return this.inflight.get(id)?.promise ?? (finished ? Promise.resolve(finished) : undefined);
  }

  /** The answer of `id`, created on first use. */
  track(id: string): Promise<DeployOutcome> {
    let p = this.inflight.get(id);
    if (!p) {
      let resolve!: (outcome: DeployOutcome) => void;
      const promise = new Promise<DeployOutcome>((r) => (resolve = r));
      p = { promise, resolve };
      this.inflight.set(id, p);
    }
    return p.promise;
  }

  /** Answers `id`. A `final` failure is remembered and the deployment held: it is never tried again. */
  settle(id: string, outcome: DeployOutcome, final: boolean): void {
    const p = this.inflight.get(id);
    this.inflight.delete(id);
    if (final && outcome.status === 'failed') {
      this.finished.set(id, outcome);
      this.heldIds.set(id, true);
    }
    p?.resolve(outcome);
  }

  /** Records a rollout's outcome: failures that were not the deployment's fault get a growing retry delay. */
  rolledOut(id: string, outcome: DeployOutcome, superseded: string[], maxRetryDelayMs: number): void {
    if (outcome.status === 'failed' && !isDeploymentFault(outcome.code)) {
      const attempts = (this.cooldown.get(id)?.attempts ?? 0) + 1;
      this.cooldown.set(id, { until: Date.now() + backoffDelay(attempts - 1, { initialMs: RETRY_INITIAL_MS, maxMs: maxRetryDelayMs, jitter: 0 }), attempts });
    } else {
      this.cooldown.delete(id);
    }
    for (const old of superseded) {
      this.heldIds.set(old, true);
      this.finished.set(old, failure(RUNTIME_ERROR_CODES.SUPERSEDED, `superseded by deployment ${id} on this node`));
    }
    this.settle(id, outcome, outcome.status === 'running' || isDeploymentFault(outcome.code));
  }

  /** When a pass may try a transiently failed rollout again (undefined: now). */
  retryAt(id: string): number | undefined {
    return this.cooldown.get(id)?.until;
  }

  /** Deployments plan() must never roll out (see PlanContext.held). */
  held(): Set<string> {
    return new Set(this.heldIds.keys());
  }
}
