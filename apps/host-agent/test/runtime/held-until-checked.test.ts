import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import { waitFor } from '@tether/testkit';
import type { Workload } from '@tether/protocol';
import type { ReadContainer } from '../../src/runtime/container-reader.js';
import type { ContainerDetails, ContainerRuntime } from '../../src/runtime/container-runtime.js';
import { startAndCheck, type ExecutorDeps } from '../../src/runtime/executor.js';
import { HealthMonitor } from '../../src/runtime/health-monitor.js';
import { DEFAULT_RUNTIME_TIMING } from '../../src/runtime/settings.js';
import { containerSpec } from '../../src/runtime/workload-spec.js';
import { containerDetails } from './support/container-details.js';

// A rollout's new container with an HTTP check takes no traffic before its check passes, from the moment it starts.
// The static proxy's answers list every running container of the service minus `notServing()`; a new container used
// to be missing from that set between its start and its first tracking, and a refresh of the answers in that window
// (seen once in 20 loaded runs of e2e-health-checks) sent a customer's request to a container still warming up.
// Here the runtime is a stand-in that records `notServing()` at every step the proxy could look; the check's probes
// go to a real local HTTP server.

let healthy = false;
let server: http.Server;
let port: number;
beforeAll(async () => {
  server = http.createServer((_req, res) => {
    res.writeHead(healthy ? 200 : 503);
    res.end(healthy ? 'ok' : 'warming');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const NETWORK = 'tether-test';

function fakeRuntime(health: HealthMonitor, seen: { step: string; notServing: boolean }[], started: Set<string>): ContainerRuntime {
  const details = (id: string): ContainerDetails =>
    containerDetails(id, {
      name: id,
      state: started.has(id) ? 'running' : 'created',
      createdAt: '2026-12-05T00:00:00Z',
      startedAt: started.has(id) ? '2026-12-05T00:00:01Z' : null,
      ipAddresses: { [NETWORK]: '127.0.0.1' },
    });
  const look = (step: string, id: string) => seen.push({ step, notServing: health.notServing().has(id) });
  return {
    create: async () => 'new-1',
    start: async (id: string) => {
      started.add(id);
      look('start', id);
    },
    inspect: async (id: string) => {
      look('inspect', id);
      return details(id);
    },
    joinAliases: async (id: string) => look('join', id),
    remove: async () => undefined,
    list: async () => [],
  } as unknown as ContainerRuntime;
}

describe('startAndCheck with an HTTP health check', () => {
  const workload: Workload = {
    serviceId: 'svc',
    serviceName: 'svc',
    deploymentId: 'd2',
    image: 'tether-test/web:2',
    env: {},
    port: 8080,
    replicas: 1,
    healthCheck: { path: '/health', port: 0, intervalSeconds: 1, timeoutSeconds: 1, healthyThreshold: 1, unhealthyThreshold: 3, startPeriodSeconds: 5 },
  };

  function deps(health: HealthMonitor, runtime: ContainerRuntime, touched: (id: string) => void): ExecutorDeps {
    return {
      runtime,
      node: 'n1',
      network: NETWORK,
      timing: { ...DEFAULT_RUNTIME_TIMING, readinessPollMs: 20, startTimeoutMs: 5_000, minReadyMs: 50 },
      logger: silentLogger,
      health,
      touched,
      restarted: () => undefined,
      failed: () => undefined,
    } as unknown as ExecutorDeps;
  }

  it('the new container is out of the answers from its start until its check passes, then in', async () => {
    healthy = false;
    const health = new HealthMonitor({ logger: silentLogger });
    const seen: { step: string; notServing: boolean }[] = [];
    const started = new Set<string>();
    const runtime = fakeRuntime(health, seen, started);
    const w = { ...workload, healthCheck: { ...workload.healthCheck!, port } };
    const spec = containerSpec('n1', NETWORK, w, 0);
    const rollout = startAndCheck(deps(health, runtime, (id) => seen.push({ step: 'touched', notServing: health.notServing().has(id) })), w, [spec], [], []);
    // Warming up for a while: several probes fail (inside the start period), the container stays out.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(health.notServing().has('new-1')).toBe(true);
    healthy = true;
    await rollout;
    // Every look before the switch (joining the alias once the check passed): held back. That is the start, the
    // answers' refresh it asks for (touched), the readiness polls and the inspect that tracks it.
    const before = seen.slice(0, seen.findIndex((s) => s.step === 'join'));
    expect(before.map((s) => s.step).slice(0, 3)).toEqual(['start', 'touched', 'inspect']);
    expect(before.filter((s) => !s.notServing)).toEqual([]);
    expect(health.notServing().has('new-1')).toBe(false);
    expect(health.view('new-1')?.verdict).toBe('healthy');
    health.stop();
  });

  it('a rollout that fails before the check leaves nothing held', async () => {
    const health = new HealthMonitor({ logger: silentLogger });
    const runtime = {
      ...fakeRuntime(health, [], new Set()),
      start: async () => {
        throw new Error('no such image');
      },
    } as unknown as ContainerRuntime;
    const created: string[] = [];
    const w = { ...workload, healthCheck: { ...workload.healthCheck!, port } };
    await expect(startAndCheck(deps(health, runtime, () => undefined), w, [containerSpec('n1', NETWORK, w, 0)], [], created)).rejects.toThrow('no such image');
    expect(created).toEqual(['new-1']);
    expect([...health.notServing()]).toEqual([]);
    health.stop();
  });

  it('without a health check nothing is held (the readiness wait decides, as before)', async () => {
    const health = new HealthMonitor({ logger: silentLogger });
    const seen: { step: string; notServing: boolean }[] = [];
    const runtime = fakeRuntime(health, seen, new Set());
    const { healthCheck: _none, ...plain } = workload;
    await startAndCheck(deps(health, runtime, () => undefined), { ...plain }, [containerSpec('n1', NETWORK, plain, 0)], [], []);
    expect(seen.some((s) => s.notServing)).toBe(false);
    health.stop();
  });
});

describe('a checked container started again (a restart after a crash)', () => {
  const check = () => ({ path: '/health', port, intervalSeconds: 1, timeoutSeconds: 1, healthyThreshold: 1, unhealthyThreshold: 3, startPeriodSeconds: 5 });
  const row = (state: 'running' | 'exited', startedAt: string) => ({
    actual: { id: 'c1', name: 'c1', serviceId: 'svc', deploymentId: 'd1', replica: 0, state, exitCode: state === 'exited' ? 1 : null, health: 'none', createdAt: 0, startedAt: 0, finishedAt: null },
    details: { startedAt, ipAddresses: { [NETWORK]: '127.0.0.1' } },
  }) as unknown as ReadContainer;
  const desired = () => ({ deploymentId: 'd1', healthCheck: check() });

  it('is out of the answers from the pass that saw it stopped until its check passes again', async () => {
    healthy = true;
    const health = new HealthMonitor({ logger: silentLogger });
    health.trackRunning([row('running', '2026-12-05T00:00:01Z')], desired, NETWORK);
    await waitFor(async () => health.view('c1')?.verdict === 'healthy', { timeoutMs: 3_000, message: 'healthy' });
    expect(health.notServing().has('c1')).toBe(false);

    // It crashed: the next pass sees it exited. The restart (plan: after its backoff) starts it before any pass
    // tracks it again; in between, a refresh of the answers must not list it.
    healthy = false;
    health.trackRunning([row('exited', '2026-12-05T00:00:01Z')], desired, NETWORK);
    expect(health.notServing().has('c1')).toBe(true);
    expect(health.view('c1')).toBeUndefined();

    // The next pass sees it running again (a new start): tracked, starting, still out while it warms up.
    health.trackRunning([row('running', '2026-12-05T00:01:00Z')], desired, NETWORK);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(health.view('c1')?.verdict).toBe('starting');
    expect(health.notServing().has('c1')).toBe(true);
    healthy = true;
    await waitFor(async () => !health.notServing().has('c1'), { timeoutMs: 3_000, message: 'serving again once its check passed' });

    // Removed (or no longer desired): nothing of it is left.
    health.trackRunning([], desired, NETWORK);
    expect(health.notServing().size).toBe(0);
    health.stop();
  });
});
