import type { Workload } from '@tether/protocol';
import type { DeployOutcome } from '../controllers.js';
import type { ReadContainer } from './container-reader.js';
import type { ContainerRuntime } from './container-runtime.js';
import { failure, outcomeOf, type DeploymentBook } from './deployment-book.js';
import type { Drainer } from './drainer.js';
import { RUNTIME_ERROR_CODES } from './errors.js';
import { rolloutWithoutOverlap } from './exclusive-rollout.js';
import { rollout, type ExecutorDeps, type RolloutAction } from './executor.js';
import { withPinnedImage } from './image-pin.js';
import { waitUntilReady } from './readiness.js';
import type { RuntimeTiming } from './settings.js';

// A `deploy` frame's bookkeeping beside the reconcile loop: a second delivery
// joins the first (or gets its final answer again), a deployment becomes the
// service's desired one until it fails, a failed one gives the node back what
// it was asked before, and every running answer names its image, pinned
// (image-pin.ts). The loop carries the deployment out in the service's lane;
// its rollout's outcome, drain and retry delay are booked here.

export interface DeployIntakeOptions {
  runtime: ContainerRuntime;
  book: DeploymentBook;
  /** Desired workloads by service id (the loop's). */
  desired: Map<string, Workload>;
  timing: Pick<RuntimeTiming, 'startTimeoutMs' | 'readinessPollMs' | 'sweepIntervalMs'>;
  deps: ExecutorDeps;
  drainer: Drainer;
  /** Why nothing is deployed now (agent stopped, node halted); null: go ahead. */
  refusal(): DeployOutcome | null;
  /** Carries the deployment out in its service's lane. */
  converge(serviceId: string, deploymentId: string): void;
}

export class DeployIntake {
  constructor(private readonly o: DeployIntakeOptions) {}

  deploy(workload: Workload): Promise<DeployOutcome> {
    const { book, desired } = this.o;
    const id = workload.deploymentId;
    // Every answer for a running deployment names the image as it ran (a redelivery's too).
    const pinned = (outcome: DeployOutcome) => withPinnedImage(this.o.runtime, workload.image, outcome);
    const existing = book.existing(id);
    if (existing) return existing.then(pinned);
    const refusal = this.o.refusal();
    if (refusal) return Promise.resolve(refusal);
    const previous = desired.get(workload.serviceId);
    desired.set(workload.serviceId, workload);
    const answer = book.track(id);
    this.o.converge(workload.serviceId, id);
    return answer.then(async (outcome) => {
      if (outcome.status === 'running') return pinned(outcome);
      // A deployment answered "failed" must not come true later on its own (say, when the daemon is back):
      // the node goes back to what it was asked before, unless something newer arrived meanwhile.
      if (outcome.status === 'failed' && desired.get(workload.serviceId) === workload) {
        if (previous) desired.set(workload.serviceId, previous);
        else desired.delete(workload.serviceId);
      }
      return outcome;
    });
  }

  /** A deployment that waited for its lane while a newer one (or the service's removal) arrived: answered superseded. */
  superseded(forDeployment: string, workload: Workload | undefined): boolean {
    if (workload?.deploymentId === forDeployment) return false;
    const by = workload ? `deployment ${workload.deploymentId}` : 'removal of the service';
    this.o.book.settle(forDeployment, failure(RUNTIME_ERROR_CODES.SUPERSEDED, `superseded by ${by} before it started`), true);
    return true;
  }

  /** A rollout the plan asked for: its outcome booked (with a retry delay after a transient failure), its drain followed. */
  async rollOut(action: RolloutAction): Promise<void> {
    const { book, deps, drainer } = this.o;
    const id = action.workload.deploymentId;
    void book.track(id);
    // A writable volume: never two containers of the service at once.
    const result = action.kind === 'replace' && !action.overlap ? await rolloutWithoutOverlap(deps, action) : await rollout(deps, action);
    book.rolledOut(id, result.outcome, result.superseded, this.o.timing.sweepIntervalMs);
    if (result.drain) drainer.follow(result.drain);
    else if (result.outcome.status === 'running' && action.workload.drainSeconds !== undefined) drainer.reportNothing(id);
    await result.cleanup;
  }

  /** Nothing to roll out for a delivered deployment: answered with what runs. */
  async answer(forDeployment: string, workload: Workload, rows: readonly ReadContainer[]): Promise<void> {
    const outcome = await this.answerFromContainers(workload, rows);
    this.o.book.settle(forDeployment, outcome, false);
    // Nothing left to drain that this run knows of (a drain under way or reported answers for itself).
    if (outcome.status === 'running' && workload.drainSeconds !== undefined && !this.o.drainer.knows(forDeployment)) this.o.drainer.reportNothing(forDeployment);
  }

  /** Nothing to roll out (a redelivery, or containers adopted after an agent restart): the answer is what runs. */
  private async answerFromContainers(workload: Workload, rows: readonly ReadContainer[]): Promise<DeployOutcome> {
    const mine = rows.filter((r) => r.actual.deploymentId === workload.deploymentId && r.actual.replica !== null && r.actual.replica < workload.replicas);
    try {
      await waitUntilReady(this.o.runtime, mine.map((r) => ({ id: r.actual.id, minReadyMs: 0 })), {
        timeoutMs: this.o.timing.startTimeoutMs,
        pollMs: this.o.timing.readinessPollMs,
        logLines: 5,
      });
    } catch (err) {
      return outcomeOf(err);
    }
    return { status: 'running', reason: `${mine.length}/${workload.replicas} replicas already running` };
  }
}
