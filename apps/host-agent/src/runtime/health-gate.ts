import { sleep } from '@tether/common';
import type { Workload, WorkloadHealthCheck } from '@tether/protocol';
import type { ContainerRuntime } from './container-runtime.js';
import { RUNTIME_ERROR_CODES, RuntimeError } from './errors.js';
import type { HealthMonitor } from './health-monitor.js';
import { describeProbe } from './http-probe.js';
import { serviceAliases } from './workload-spec.js';

// A rollout's HTTP health check (capability `workload.healthCheck`): the new
// containers run beside the old ones without the service alias, so nothing
// but the agent's probes reaches them; once every one passed its check they
// join the alias (and so the proxy's answers), and only then are the old ones
// retired. A check that does not pass fails the rollout with
// HEALTHCHECK_FAILED and the last probe as evidence; the old containers never
// noticed.

export interface HealthGateDeps {
  runtime: ContainerRuntime;
  network: string;
  health: HealthMonitor;
  pollMs: number;
  /** Bound on the wait after the start period. */
  timeoutMs: number;
  touched(id: string): void;
}

const target = (check: WorkloadHealthCheck) => `GET :${check.port}${check.path}`;

/** Starts the checks of `ids` (running containers of `workload`) and waits until all pass; throws HEALTHCHECK_FAILED otherwise. */
export async function waitUntilChecked(deps: HealthGateDeps, workload: Workload, ids: string[]): Promise<void> {
  const check = workload.healthCheck;
  if (!check || ids.length === 0) return;
  for (const id of ids) await trackFresh(deps, workload.serviceId, check, id);
  const deadline = Date.now() + check.startPeriodSeconds * 1000 + deps.timeoutMs;
  // A throw leaves the containers tracked: the rollout that made them untracks them with the rest (executor.ts startAndCheck).
  for (;;) {
    const views = ids.map((id) => ({ id, view: deps.health.view(id) }));
    const bad = views.find((v) => v.view?.verdict === 'unhealthy');
    if (bad) {
      const last = bad.view?.lastProbe;
      throw new RuntimeError(
        RUNTIME_ERROR_CODES.HEALTHCHECK_FAILED,
        `health check ${target(check)} failed ${check.unhealthyThreshold} time(s) in a row; last probe ${last ? describeProbe(last) : 'none'}`,
      );
    }
    if (views.every((v) => v.view?.verdict === 'healthy')) return;
    if (Date.now() >= deadline) {
      const last = views.find((v) => v.view?.verdict !== 'healthy')?.view?.lastProbe;
      throw new RuntimeError(
        RUNTIME_ERROR_CODES.HEALTHCHECK_FAILED,
        `health check ${target(check)} did not pass ${check.healthyThreshold} time(s) in a row within ${check.startPeriodSeconds} s + ${deps.timeoutMs} ms; last probe ${last ? describeProbe(last) : 'none'}`,
      );
    }
    await sleep(deps.pollMs);
  }
}

/** The checked containers join the service alias: from now on the proxy (and every dialer of the alias) reaches them. */
export async function joinService(deps: HealthGateDeps, workload: Workload, ids: string[]): Promise<void> {
  const check = workload.healthCheck;
  if (!check) return;
  for (const id of ids) {
    await deps.runtime.joinAliases(id, deps.network, serviceAliases(workload));
    deps.touched(id);
    // Its address may have changed with the new endpoint: the checks go on at the new one.
    const d = await deps.runtime.inspect(id);
    deps.health.track(id, { serviceId: workload.serviceId, check, host: d.ipAddresses?.[deps.network] ?? null, startedAt: d.startedAt });
  }
}

async function trackFresh(deps: HealthGateDeps, serviceId: string, check: WorkloadHealthCheck, id: string): Promise<void> {
  const d = await deps.runtime.inspect(id);
  deps.health.track(id, { serviceId, check, host: d.ipAddresses?.[deps.network] ?? null, startedAt: d.startedAt });
}
