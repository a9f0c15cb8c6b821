import net from 'node:net';
import { ensureDocker, sleep, waitFor } from '@tether/testkit';
import type { Workload } from '@tether/protocol';
import { beforeAll, describe, expect, it } from 'vitest';
import { LABELS } from '../../src/docker/docker-client.js';
import type { DockerWorkloadController } from '../../src/runtime/docker-workload-controller.js';
import { useHarness } from './support/harness.js';

const docker = await ensureDocker();

const START_TIMEOUT_MS = 2_000;
const PULL_TIMEOUT_MS = 1_500;

describe.skipIf(!docker.available)('runtime: failed deployments keep the old container serving', () => {
  const h = useHarness('failures');
  let controller: DockerWorkloadController;
  let oldId: string;

  beforeAll(async () => {
    controller = h.controller({ timing: { startTimeoutMs: START_TIMEOUT_MS, pullTimeoutMs: PULL_TIMEOUT_MS } });
    await controller.start();
    const outcome = await controller.deploy(h.workload('api', 'api-d1', { env: { MESSAGE: 'ok-api-1' } }));
    expect(outcome).toMatchObject({ status: 'running' });
    oldId = (await h.containers())[0]!.id;
  });

  /** Deploys, then checks the old container is untouched and nothing of the new deployment is left. */
  async function failedDeploy(w: Workload) {
    const started = Date.now();
    const outcome = await controller.deploy(w);
    const ms = Date.now() - started;
    const left = await h.containers();
    expect(left.map((c) => [c.id, c.state, c.labels[LABELS.deployment]])).toEqual([[oldId, 'running', 'api-d1']]);
    expect(await h.httpGet(oldId)).toBe('ok-api-1');
    expect(await h.viaAlias('api')).toBe('ok-api-1');
    return { outcome, ms };
  }

  it('unknown image: a registry code with the daemon\'s reason, fast, never a hang', async () => {
    const { outcome, ms } = await failedDeploy(h.workload('api', 'api-d2', { image: 'tether-test/does-not-exist:1' }));
    // Offline (here, CI) Docker Hub does not resolve: REGISTRY_UNREACHABLE; online it answers "pull access denied": REGISTRY_AUTH_FAILED.
    expect(outcome.status).toBe('failed');
    expect(outcome).toMatchObject({ code: expect.stringMatching(/^(REGISTRY_UNREACHABLE|REGISTRY_AUTH_FAILED)$/) });
    expect(outcome.reason).toMatch(/^registry docker\.io (could not be reached|refused) .*tether-test\/does-not-exist:1.*; the registry said: .+/);
    expect(ms).toBeLessThan(10_000);
    console.log(`unknown image → failed in ${ms} ms: ${outcome.reason}`);
  });

  it('a container that exits at once: CONTAINER_EXITED "exited with code 3", with its last output', async () => {
    const { outcome } = await failedDeploy(h.workload('api', 'api-d3', { env: { EXIT_CODE: '3' } }));
    expect(outcome).toMatchObject({ status: 'failed', code: 'CONTAINER_EXITED' });
    expect(outcome.reason).toMatch(/^exited with code 3; last output: failing on purpose$/);
  });

  it('a failing HEALTHCHECK: HEALTHCHECK_FAILED with the probe\'s output', async () => {
    const { outcome } = await failedDeploy(h.workload('api', 'api-d4', { image: h.images.webHealthcheck, env: { UNHEALTHY: '1' } }));
    expect(outcome).toMatchObject({ status: 'failed', code: 'HEALTHCHECK_FAILED' });
    expect(outcome.reason).toMatch(/^health check failed: exit 1: probe says unhealthy$/);
  });

  it('never healthy in time: START_TIMEOUT after the start timeout, not before and not much after', async () => {
    const { outcome, ms } = await failedDeploy(h.workload('api', 'api-d5', { image: h.images.webSlowHealthcheck }));
    expect(outcome).toEqual({ status: 'failed', code: 'START_TIMEOUT', reason: `not healthy within ${START_TIMEOUT_MS} ms (health starting)` });
    expect(ms).toBeGreaterThanOrEqual(START_TIMEOUT_MS);
    expect(ms).toBeLessThan(START_TIMEOUT_MS + 5_000);
  });

  it('a registry that accepts and never answers: REGISTRY_UNREACHABLE when the pull timeout passes, not a hang', async () => {
    const sockets = new Set<net.Socket>();
    const registry = net.createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => registry.listen(0, '127.0.0.1', resolve));
    const { port } = registry.address() as net.AddressInfo;
    try {
      const { outcome, ms } = await failedDeploy(h.workload('api', 'api-d7', { image: `127.0.0.1:${port}/tether/hang:1` }));
      expect(outcome).toMatchObject({ status: 'failed', code: 'REGISTRY_UNREACHABLE' });
      expect(outcome.reason).toMatch(new RegExp(`^registry 127\\.0\\.0\\.1:${port} could not be reached .*no answer from the registry within ${PULL_TIMEOUT_MS} ms`));
      expect(ms).toBeGreaterThanOrEqual(PULL_TIMEOUT_MS);
      expect(ms).toBeLessThan(PULL_TIMEOUT_MS + 5_000);
      expect(sockets.size).toBeGreaterThan(0);
    } finally {
      for (const s of sockets) s.destroy();
      registry.close();
    }
  });

  it('a failed deployment is not tried again: a redelivery gets the same answer, a desired set naming it changes nothing', async () => {
    const again = await controller.deploy(h.workload('api', 'api-d3', { env: { EXIT_CODE: '3' } }));
    expect(again).toMatchObject({ status: 'failed', code: 'CONTAINER_EXITED' });
    controller.setDesired([h.workload('api', 'api-d4', { image: h.images.webHealthcheck, env: { UNHEALTHY: '1' } })]);
    await sleep(1_500);
    expect((await h.containers()).map((c) => c.id)).toEqual([oldId]);
    // The next good deployment still goes through.
    expect(await controller.deploy(h.workload('api', 'api-d6', { env: { MESSAGE: 'ok-api-6' } }))).toMatchObject({ status: 'running' });
    // The old container leaves the alias once it has stopped (after the deploy answered); then only the new one answers.
    await waitFor(async () => (await h.containers()).every((c) => c.id !== oldId), { timeoutMs: 20_000 });
    expect(await h.viaAlias('api')).toBe('ok-api-6');
  });
});
