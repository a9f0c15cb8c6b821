import { ensureDocker, sleep, waitFor } from '@tether/testkit';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import type { Release } from '@tether/protocol';
import type { ContainerFailure } from '../../src/runtime/executor.js';
import { useHarness } from './support/harness.js';

// An allocation's container that crashes is restarted with the reconcile loop's backoff and budget (the same
// container, as for a deploy); past the budget the allocation reads `failed` (no deploy.result: that answers
// only a deploy) and the exited container stays as evidence.

const docker = await ensureDocker();
const BACKOFF_MS = 1_500;

describe.skipIf(!docker.available)('runtime: crashed allocation containers', () => {
  const h = useHarness('alloc-crash', { controllersPerTest: true });
  const release = (serviceId: string, deploymentId: string, env: Record<string, string>): Release => {
    const { replicas: _replicas, ...spec } = h.workload(serviceId, deploymentId, { env });
    return spec;
  };

  it('a killed allocation container is started again after its backoff, not before; the allocation keeps its container', async () => {
    const controller = h.controller({ logger: silentLogger, restart: { budget: 3, backoffInitialMs: BACKOFF_MS, backoffMaxMs: 10_000 } });
    await controller.start();
    controller.setAllocations({ id: 's1', releases: [release('victim', 'victim-d1', { MESSAGE: 'ok-victim' })], allocations: [{ allocationId: 'alc-v', serviceId: 'victim', deploymentId: 'victim-d1' }] });
    const running = () => controller.allocationStatus()?.find((s) => s.allocationId === 'alc-v' && s.state === 'running');
    const first = await waitFor(running, { timeoutMs: 10_000, intervalMs: 25, message: 'alc-v running' });
    await h.docker.getContainer(first.containerId!).kill();
    const killedAt = Date.now();
    await waitFor(async () => (await controller.observe()).containers.find((c) => c.state === 'exited'), { timeoutMs: 2_000, intervalMs: 25, message: 'exited observed' });
    const again = await waitFor(async () => (await controller.observe()).containers.find((c) => c.state === 'running' && c.restartCount === 1), { timeoutMs: BACKOFF_MS + 5_000, intervalMs: 25, message: 'running again' });
    const downMs = Date.now() - killedAt;
    console.log(`allocation crash → running again: ${downMs} ms (restart backoff ${BACKOFF_MS} ms)`);
    expect(downMs).toBeGreaterThanOrEqual(BACKOFF_MS - 100);
    expect(downMs).toBeLessThan(BACKOFF_MS + 3_000);
    expect(again).toMatchObject({ containerId: first.containerId, allocationId: 'alc-v' });
    await waitFor(running, { timeoutMs: 2_000, intervalMs: 25, message: 'status running again' });
    expect(running()?.containerId).toBe(first.containerId);
  });

  it('past the restart budget the allocation reads failed with the reason, once, and the container is left exited', async () => {
    const reports: ContainerFailure[] = [];
    const controller = h.controller({ logger: silentLogger, restart: { budget: 2, backoffInitialMs: 200, backoffMaxMs: 1_000 }, onFailure: (r) => reports.push(r) });
    await controller.start();
    controller.setAllocations({
      id: 's2',
      releases: [release('flaky', 'flaky-d1', { MESSAGE: 'ok-flaky', EXIT_AFTER: '1', EXIT_CODE: '4' })],
      allocations: [{ allocationId: 'alc-f', serviceId: 'flaky', deploymentId: 'flaky-d1' }],
    });
    const failed = await waitFor(() => controller.allocationStatus()?.find((s) => s.allocationId === 'alc-f' && s.state === 'failed'), { timeoutMs: 15_000, intervalMs: 50, message: 'alc-f failed' });
    expect(failed).toMatchObject({ code: 'CONTAINER_EXITED', reason: 'exited with code 4; restart budget of 2 used up', runningDeploymentId: 'flaky-d1' });
    // No deploy.result for an allocation.
    expect(reports).toEqual([]);
    await sleep(2_000);
    const [state] = (await controller.observe()).containers.filter((c) => c.serviceId === 'flaky');
    expect(state).toMatchObject({ containerId: failed.containerId, state: 'exited', exitCode: 4, restartCount: 2, allocationId: 'alc-f' });
    expect(await h.containers()).toHaveLength(1);
  });
});
