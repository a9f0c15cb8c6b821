import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createDockerClient } from '../../src/docker/docker-client.js';
import { createDockerWorkloadController } from '../../src/runtime/index.js';
import { DEFAULT_RESTART_POLICY, DEFAULT_RUNTIME_TIMING } from '../../src/runtime/settings.js';

const base = { TETHER_PANEL_URL: 'http://127.0.0.1:8080', TETHER_NODE_TOKEN: 'n'.repeat(32) };

describe('runtime configuration', () => {
  it('defaults match the runtime defaults (and docs/operations.md)', () => {
    const { runtime } = loadConfig(base);
    const { readinessPollMs: _poll, eventReconnectMinMs: _min, eventReconnectMaxMs: _max, ...configurable } = DEFAULT_RUNTIME_TIMING;
    expect(runtime.timing).toEqual(configurable);
    expect(runtime.restart).toEqual(DEFAULT_RESTART_POLICY);
  });

  it('reads every variable and refuses inconsistent restart backoff', () => {
    const { runtime } = loadConfig({ ...base, TETHER_START_TIMEOUT_MS: '1500', TETHER_RESTART_BUDGET: '0', TETHER_DRAIN_MS: '0', TETHER_RUNTIME_SWEEP_MS: '5000' });
    expect(runtime.timing).toMatchObject({ startTimeoutMs: 1_500, drainMs: 0, sweepIntervalMs: 5_000 });
    expect(runtime.restart.budget).toBe(0);
    expect(() => loadConfig({ ...base, TETHER_RESTART_BACKOFF_MIN_MS: '5000', TETHER_RESTART_BACKOFF_MAX_MS: '100' })).toThrow(/TETHER_RESTART_BACKOFF_MIN_MS/);
    expect(() => loadConfig({ ...base, TETHER_OBSERVE_TIMEOUT_MS: 'soon' })).toThrow(/whole number/);
  });

  it('built from config with no engine behind DOCKER_HOST: says so once, reports the runtime unavailable, fails deploys fast', async () => {
    const warnings: string[] = [];
    const logger = { debug() {}, info() {}, error() {}, warn: (o: object, m?: string) => warnings.push(`${m} ${JSON.stringify(o)}`) };
    const { runtime } = loadConfig({ ...base, DOCKER_HOST: 'unix:///tmp/tether-no-such-docker.sock' });
    const controller = createDockerWorkloadController(createDockerClient(runtime.dockerHost), runtime, 'cfg-node', { logger });
    await controller.start();
    try {
      const observed = await controller.observe();
      expect(observed).toEqual({ containers: [], runtime: { available: false, error: expect.stringMatching(/docker is unreachable \(list containers\): .*ENOENT/) } });
      const outcome = await controller.deploy({ serviceId: 's', serviceName: 's', deploymentId: 'd', image: 'x:1', env: {}, port: null, replicas: 1 });
      expect(outcome).toMatchObject({ status: 'failed', code: 'RUNTIME_UNAVAILABLE' });
      expect(warnings.filter((w) => w.includes('docker runtime unavailable'))).toHaveLength(1);
    } finally {
      await controller.stop();
    }
  });
});
