import type { DeployOutcome } from '../controllers.js';
import { RuntimeError } from './errors.js';
import type { ContainerSpec } from './container-runtime.js';
import { failed, prepare, slotSpecs, startAndCheck, type ExecutorDeps, type RolloutAction, type RolloutResult } from './executor.js';

/**
 * Rollout of a service with a writable volume or a fenced release: two containers must never
 * write it at once, so there is no overlap (and no drain): stop the old
 * containers, start the new ones, check them; if the check fails, the new
 * ones are removed and the old ones started again. The old containers are
 * removed only once the new ones are ready. The service is down between the
 * stop and the new container's readiness; the outcome's reason says so.
 */
export async function rolloutWithoutOverlap(
  deps: ExecutorDeps,
  action: Extract<RolloutAction, { kind: 'replace' }>,
  specs: ContainerSpec[] = slotSpecs(deps, action),
): Promise<RolloutResult> {
  const { runtime, timing } = deps;
  const { workload } = action;
  const old = action.retire;
  const stopped: string[] = [];
  const created: string[] = [];
  try {
    // Everything that can fail without touching the old containers comes first.
    await prepare(deps, workload);
    for (const c of old) {
      if (c.state !== 'running' && c.state !== 'restarting' && c.state !== 'paused') continue;
      deps.touched(c.id);
      await runtime.stop(c.id, timing.stopTimeoutMs);
      stopped.push(c.id);
      deps.touched(c.id);
    }
    await startAndCheck(deps, workload, specs, action.keep, created);
  } catch (err) {
    deps.logger.warn({ deploymentId: workload.deploymentId, err }, 'rollout without overlap failed; starting the old containers again');
    await Promise.all(created.map((id) => runtime.remove(id).then(() => deps.touched(id)).catch(() => undefined)));
    const restarted = await restartOld(deps, stopped);
    const outcome = failed(err);
    const note = stopped.length === 0 ? '' : `; no overlap (writable volume or fenced): the old container(s) were stopped first and ${restarted === stopped.length ? 'started again' : `${restarted}/${stopped.length} started again`}`;
    return { outcome: outcome.status === 'failed' ? { ...outcome, reason: `${outcome.reason}${note}` } : outcome, superseded: [], cleanup: Promise.resolve() };
  }
  const cleanup = Promise.all(
    old.map((c) =>
      runtime
        .remove(c.id)
        .then(() => deps.touched(c.id))
        .catch((err: unknown) => deps.logger.warn({ container: c.name, err }, 'removing an old container failed; the next pass retries')),
    ),
  ).then(() => undefined);
  const count = specs.length + action.keep.length;
  const replaced = old.length ? `, replaced ${old.length} old container(s) without overlap (writable volume or fenced: stopped the old one first)` : '';
  const outcome: DeployOutcome = { status: 'running', reason: `${count}/${workload.replicas} replicas running${replaced}` };
  deps.logger.info({ deploymentId: workload.deploymentId, retired: old.length }, 'rollout without overlap switched');
  return { outcome, superseded: [...new Set(old.map((c) => c.deploymentId))], cleanup };
}

async function restartOld(deps: ExecutorDeps, ids: string[]): Promise<number> {
  let started = 0;
  for (const id of ids) {
    try {
      await deps.runtime.start(id);
      deps.touched(id);
      started++;
    } catch (err) {
      deps.logger.error({ containerId: id, err: err instanceof RuntimeError ? err.message : err }, 'could not start the old container again');
    }
  }
  return started;
}
