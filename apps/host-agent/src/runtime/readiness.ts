import { sleep, truncate } from '@tether/common';
import type { ContainerDetails, ContainerRuntime } from './container-runtime.js';
import { RUNTIME_ERROR_CODES, RuntimeError } from './errors.js';

export interface ReadinessOptions {
  /** Everything must be ready within this bound. */
  timeoutMs: number;
  pollMs: number;
  /** Lines of the container's output quoted when it exits. */
  logLines: number;
}

export interface ReadinessTarget {
  id: string;
  /**
   * Without a HEALTHCHECK, "running" only means the process exists; it must
   * also stay up this long, so a process that dies right after start fails
   * the rollout instead of replacing a working container.
   */
  minReadyMs: number;
}


async function exitReason(runtime: ContainerRuntime, d: ContainerDetails, logLines: number): Promise<string> {
  let reason = d.exitCode === null ? `container ${d.state}` : `exited with code ${d.exitCode}`;
  if (d.oomKilled) reason += ' (killed: out of memory)';
  if (d.error) reason += `: ${d.error}`;
  const output = await runtime.logsTail(d.id, logLines).catch(() => '');
  if (output.trim()) reason += `; last output: ${truncate(output.trim().replace(/\s*\n\s*/g, ' | '), 401, { keep: 'end' })}`;
  return reason;
}

/**
 * Polls each container until it runs (and, with a HEALTHCHECK, is healthy),
 * or one of them fails. Rejects with a RuntimeError whose message is the
 * precise reason: "exited with code 3", "health check failed: …",
 * "not running within N ms".
 */
export async function waitUntilReady(runtime: ContainerRuntime, targets: ReadinessTarget[], options: ReadinessOptions): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  let failed = false;
  const one = async (target: ReadinessTarget): Promise<void> => {
    let runningSince: number | null = null;
    let seenStartedAt: string | null = null;
    let last: ContainerDetails | null = null;
    while (!failed) {
      const d = await runtime.inspect(target.id);
      last = d;
      const now = Date.now();
      if (d.state === 'exited' || d.state === 'dead') {
        const code = d.oomKilled ? RUNTIME_ERROR_CODES.OOM_KILLED : RUNTIME_ERROR_CODES.CONTAINER_EXITED;
        throw new RuntimeError(code, await exitReason(runtime, d, options.logLines));
      }
      if (d.health === 'unhealthy') {
        throw new RuntimeError(RUNTIME_ERROR_CODES.HEALTHCHECK_FAILED, `health check failed: ${d.lastHealthOutput ?? 'no probe output'}`);
      }
      if (d.state === 'running') {
        // Measured on the agent's clock from the first sighting, so a remote engine's clock does not matter.
        if (runningSince === null || d.startedAt !== seenStartedAt) runningSince = now;
        seenStartedAt = d.startedAt;
        const settled = d.hasHealthcheck ? d.health === 'healthy' : now - runningSince >= target.minReadyMs;
        if (settled) return;
      } else {
        runningSince = null;
      }
      if (now >= deadline) break;
      await sleep(Math.min(options.pollMs, Math.max(1, deadline - now)));
    }
    if (failed) return;
    const within = `within ${options.timeoutMs} ms`;
    const message = !last || last.state !== 'running'
      ? `not running ${within} (state ${last?.state ?? 'unknown'})`
      : last.hasHealthcheck
        ? `not healthy ${within} (health ${last.health}${last.lastHealthOutput ? `, last probe ${last.lastHealthOutput}` : ''})`
        : `not running for ${target.minReadyMs} ms ${within}`;
    throw new RuntimeError(RUNTIME_ERROR_CODES.START_TIMEOUT, message);
  };
  await Promise.all(
    targets.map((t) =>
      one(t).catch((err: unknown) => {
        failed = true;
        throw err;
      }),
    ),
  );
}
