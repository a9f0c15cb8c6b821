import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ensureDocker, sleep, waitFor } from '@tether/testkit';
import type { ContainerState } from '@tether/protocol';
import { describe, expect, it } from 'vitest';
import type { ContainerFailure } from '../../src/runtime/executor.js';
import { useHarness } from './support/harness.js';

const docker = await ensureDocker();

const HEARTBEAT_MS = 5_000;
const BACKOFF_MS = 1_500;

describe.skipIf(!docker.available)('runtime: crashes and the restart budget', () => {
  const h = useHarness('crash', { controllersPerTest: true });

  it('a container killed from outside shows as exited at the next observe, then the agent restarts it after its backoff', async () => {
    const controller = h.controller({ restart: { budget: 3, backoffInitialMs: BACKOFF_MS, backoffMaxMs: 10_000 } });
    await controller.start();
    expect(await controller.deploy(h.workload('victim', 'victim-d1', { env: { MESSAGE: 'ok-victim' } }))).toMatchObject({ status: 'running' });
    const [before] = (await controller.observe()).containers;

    await h.docker.getContainer(before!.containerId).kill();
    const killedAt = Date.now();
    // The very next heartbeat must already tell the truth: read from Docker, not remembered.
    const exited = await waitFor(async () => (await controller.observe()).containers.find((c) => c.state === 'exited'), { timeoutMs: HEARTBEAT_MS, intervalMs: 50, message: 'exited state observed' });
    expect(Date.now() - killedAt).toBeLessThan(BACKOFF_MS);
    expect(exited).toMatchObject({ containerId: before!.containerId, exitCode: 137, restartCount: 0 });
    expect(Date.parse(exited.since)).toBeGreaterThan(Date.parse(before!.since));

    let running: ContainerState | undefined;
    await waitFor(async () => (running = (await controller.observe()).containers.find((c) => c.state === 'running')), { timeoutMs: BACKOFF_MS + HEARTBEAT_MS, intervalMs: 50, message: 'running again' });
    const downMs = Date.now() - killedAt;
    console.log(`crash → running again: ${downMs} ms (restart backoff ${BACKOFF_MS} ms)`);
    // Not before its backoff (no hot restart loop), not much after (events, not the two-minute sweep, drove it).
    expect(downMs).toBeGreaterThanOrEqual(BACKOFF_MS - 100);
    expect(running).toMatchObject({ containerId: before!.containerId, restartCount: 1, exitCode: null });
    expect(await h.httpGet(before!.containerId)).toBe('ok-victim');
  });

  it('a container that keeps crashing is restarted within its budget, then reported failed and left exited; an agent restart keeps its counts', async () => {
    const reports: ContainerFailure[] = [];
    const countersFile = path.join(await mkdtemp(path.join(os.tmpdir(), 'tether-restarts-')), 'restart-counters.json');
    const policy = { budget: 2, backoffInitialMs: 200, backoffMaxMs: 1_000 };
    const controller = h.controller({ restart: policy, onFailure: (r) => reports.push(r), restartCountersFile: countersFile });
    await controller.start();
    // Serves for a second, then exits 4: passes readiness, then crash-loops.
    const w = h.workload('flaky', 'flaky-d1', { env: { MESSAGE: 'ok-flaky', EXIT_AFTER: '1', EXIT_CODE: '4' } });
    expect(await controller.deploy(w)).toMatchObject({ status: 'running' });

    await waitFor(() => reports.length > 0, { timeoutMs: 12_000, intervalMs: 50, message: 'budget exhausted and reported' });
    expect(reports).toEqual([expect.objectContaining({ serviceId: 'flaky', deploymentId: 'flaky-d1', code: 'CONTAINER_EXITED', reason: 'exited with code 4; restart budget of 2 used up' })]);
    const [state] = (await controller.observe()).containers.filter((c) => c.serviceId === 'flaky');
    expect(state).toMatchObject({ state: 'exited', exitCode: 4, restartCount: 2 });

    // Given up means given up: no more restarts, no second report, the evidence stays.
    await sleep(2_000);
    const [later] = (await controller.observe()).containers.filter((c) => c.serviceId === 'flaky');
    expect(later).toMatchObject({ containerId: state!.containerId, state: 'exited', restartCount: 2 });
    expect(reports).toHaveLength(1);

    // The agent restarts: the counts (and the budget used up) come back from the file; still no restart.
    await controller.stop();
    const restarted = h.controller({ restart: policy, onFailure: (r) => reports.push(r), restartCountersFile: countersFile });
    await restarted.start();
    restarted.setDesired([w]);
    await sleep(1_500);
    const [afterRestart] = (await restarted.observe()).containers.filter((c) => c.serviceId === 'flaky');
    expect(afterRestart).toMatchObject({ containerId: state!.containerId, state: 'exited', restartCount: 2 });
    expect(reports).toHaveLength(1);
  });
});
