import { ensureSecondDaemonSupport, secondDaemon, waitFor, type SecondDaemon } from '@tether/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DockerWorkloadController } from '../../src/runtime/docker-workload-controller.js';
import { TEST_TIMING, createHarness, type RuntimeHarness } from './support/harness.js';
import { ensureRuntimeImages } from './support/images.js';

// Starting a second dockerd in its own network namespace takes root (CI runs as root).
const support = await ensureSecondDaemonSupport();

// The daemon under test is a private second dockerd (see secondDaemon in @tether/testkit):
// stopping or freezing the shared engine would break every other suite.
describe.skipIf(!support.available)('runtime: the Docker daemon goes away and comes back', () => {
  let daemon: SecondDaemon;
  let h: RuntimeHarness;
  let controller: DockerWorkloadController;
  let containerId: string;

  beforeAll(async () => {
    const images = await ensureRuntimeImages();
    daemon = secondDaemon('rt');
    await daemon.start();
    await daemon.loadImages([images.web]);
    h = await createHarness('daemon', { dockerHost: daemon.dockerHost });
    // The sweep is far away: only the event stream (and its reconnect) can drive recovery here.
    controller = h.controller({ timing: { sweepIntervalMs: 120_000 }, restart: { backoffInitialMs: 200, backoffMaxMs: 1_000 } });
    await controller.start();
    expect(await controller.deploy(h.workload('svc', 'svc-d1', { env: { MESSAGE: 'ok-svc' } }))).toMatchObject({ status: 'running' });
    containerId = (await controller.observe()).containers[0]!.containerId;
  });
  afterAll(async () => {
    daemon?.thaw();
    await h?.cleanup().catch(() => undefined);
    await daemon?.destroy();
  });

  it('stopped: observe() says unavailable and reports no container; started again: the agent reconnects and restarts what the stop killed', async () => {
    await daemon.stop();
    const asked = Date.now();
    const down = await controller.observe();
    expect(Date.now() - asked).toBeLessThan(TEST_TIMING.observeTimeoutMs);
    expect(down.runtime.available).toBe(false);
    expect(down.runtime.error).toMatch(/docker is unreachable \(list containers\)/);
    expect(down.containers).toEqual([]);
    expect(await controller.deploy(h.workload('svc', 'svc-d2'))).toMatchObject({ status: 'failed', code: 'RUNTIME_UNAVAILABLE' });

    await daemon.start();
    const back = Date.now();
    // Nobody calls observe() meanwhile: the reconnected event stream alone must trigger the repair.
    const running = await waitFor(
      async () => {
        const c = (await h.runtime.list({})).find((x) => x.id === containerId);
        return c?.state === 'running' ? c : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 100, message: 'container restarted after the daemon came back' },
    );
    console.log(`daemon back → container running again: ${Date.now() - back} ms`);
    expect(running.id).toBe(containerId);
    const up = await controller.observe();
    expect(up.runtime).toEqual({ available: true, error: null });
    // At least the one restart after the daemon came back; one more when the agent's restart landed while the daemon was still shutting down.
    expect(up.containers).toEqual([expect.objectContaining({ containerId, state: 'running', restartCount: expect.any(Number) })]);
    expect(up.containers[0]!.restartCount).toBeGreaterThanOrEqual(1);
  });

  it('frozen (SIGSTOP): observe() answers within its bound and says unavailable; thawed: available again', async () => {
    await daemon.freeze();
    try {
      const asked = Date.now();
      const frozen = await controller.observe();
      const ms = Date.now() - asked;
      expect(ms).toBeGreaterThanOrEqual(TEST_TIMING.observeTimeoutMs - 50);
      expect(ms).toBeLessThan(TEST_TIMING.observeTimeoutMs + 1_000);
      expect(frozen).toEqual({ containers: [], runtime: { available: false, error: `docker did not answer list containers within ${TEST_TIMING.observeTimeoutMs} ms` } });
    } finally {
      daemon.thaw();
    }
    await waitFor(async () => (await controller.observe()).runtime.available, { timeoutMs: 10_000, message: 'available after thaw' });
    expect((await controller.observe()).containers).toEqual([expect.objectContaining({ containerId, state: 'running' })]);
  });

  it('after all that the event stream works again: a kill is repaired without the sweep', async () => {
    const before = (await controller.observe()).containers[0]!.restartCount;
    await h.docker.getContainer(containerId).kill();
    await waitFor(async () => (await controller.observe()).containers.find((c) => c.state === 'running' && c.restartCount === before + 1), {
      timeoutMs: 10_000,
      intervalMs: 100,
      message: 'restarted by an event-driven pass',
    });
  });
});
