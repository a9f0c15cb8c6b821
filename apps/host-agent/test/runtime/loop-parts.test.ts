import { describe, expect, it, vi } from 'vitest';
import { silentLogger } from '@tether/common';
import type { Workload } from '@tether/protocol';
import type { DeployOutcome, ProxyTraffic } from '../../src/controllers.js';
import type { ReadContainer } from '../../src/runtime/container-reader.js';
import type { ContainerRuntime } from '../../src/runtime/container-runtime.js';
import { DeployIntake } from '../../src/runtime/deploy-intake.js';
import { DeploymentBook } from '../../src/runtime/deployment-book.js';
import { Halt } from '../../src/runtime/halt.js';
import { RuntimeAvailability } from '../../src/runtime/runtime-availability.js';
import { TrafficChannel } from '../../src/traffic-channel.js';
import { VolumeRemoval } from '../../src/runtime/volume-removal.js';
import { PendingRemovals } from '../../src/volumes/index.js';

// The parts beside the reconcile loop (runtime/workload-parts.ts), each on its own, without Docker.

const workload = (deploymentId: string): Workload => ({ serviceId: 'svc', deploymentId, image: 'app:1', env: {}, replicas: 1 }) as Workload;

describe('deploy intake', () => {
  const intake = (refusal: DeployOutcome | null = null) => {
    const book = new DeploymentBook();
    const desired = new Map<string, Workload>();
    const lanes: string[] = [];
    const runtime = { imageIdentity: async () => null } as unknown as ContainerRuntime;
    const parts = new DeployIntake({
      runtime,
      book,
      desired,
      timing: { startTimeoutMs: 100, readinessPollMs: 10, sweepIntervalMs: 100 },
      deps: {} as never,
      drainer: {} as never,
      refusal: () => refusal,
      converge: (_serviceId, id) => void lanes.push(id),
    });
    return { parts, book, desired, lanes };
  };

  it('a second delivery joins the first; one carried out', async () => {
    const { parts, book, lanes } = intake();
    const first = parts.deploy(workload('d1'));
    const second = parts.deploy(workload('d1'));
    expect(lanes).toEqual(['d1']);
    book.settle('d1', { status: 'running', reason: 'up' }, false);
    expect(await first).toEqual({ status: 'running', reason: 'up' });
    expect(await second).toEqual({ status: 'running', reason: 'up' });
  });

  it('refused while stopped or halted: nothing becomes desired', async () => {
    const { parts, desired, lanes } = intake({ status: 'failed', code: 'RUNTIME_UNAVAILABLE', reason: 'stopped' });
    expect((await parts.deploy(workload('d1'))).status).toBe('failed');
    expect([desired.size, lanes.length]).toEqual([0, 0]);
  });

  it('a failed deployment gives the node back what it was asked before', async () => {
    const { parts, book, desired } = intake();
    const before = workload('d0');
    desired.set('svc', before);
    const answer = parts.deploy(workload('d1'));
    expect(desired.get('svc')?.deploymentId).toBe('d1');
    book.settle('d1', { status: 'failed', code: 'IMAGE_PULL_FAILED', reason: 'no' }, true);
    await answer;
    expect(desired.get('svc')).toBe(before);
  });

  it('a deployment that waited while a newer one arrived is answered superseded', async () => {
    const { parts, book } = intake();
    const answer = book.track('d1');
    expect(parts.superseded('d1', workload('d2'))).toBe(true);
    expect(await answer).toMatchObject({ status: 'failed', code: 'SUPERSEDED' });
    expect(parts.superseded('d2', workload('d2'))).toBe(false);
  });
});

describe('halt', () => {
  it('ends only with a set after resume(); what it stopped stays out of the answers until then', async () => {
    const stopped: string[] = [];
    const switched: number[] = [];
    const traffic = { switchAnswers: async () => void switched.push(stopped.length), openConnections: async () => 0 } as ProxyTraffic;
    const runtime = { stop: async (id: string) => void stopped.push(id) } as unknown as ContainerRuntime;
    const halt = new Halt({ runtime, traffic: () => traffic, stopTimeoutMs: 10, invalidate: () => undefined, logger: silentLogger });
    halt.begin();
    const row = (id: string, state: string) => ({ actual: { id, name: id, state } }) as unknown as ReadContainer;
    await halt.stopAll([row('c1', 'running'), row('c2', 'exited')]);
    // Out of the answers before anything stopped.
    expect([switched, stopped]).toEqual([[0], ['c1']]);
    expect([...halt.notServing(['c3'])].sort()).toEqual(['c1', 'c3']);
    halt.released();
    expect(halt.active).toBe(true);
    halt.resume();
    halt.released();
    expect(halt.active).toBe(false);
    expect([...halt.notServing([])]).toEqual([]);
  });
});

describe('runtime availability', () => {
  it('says when the runtime came back, and reports each outage once', () => {
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (_o: object, m?: string) => void warnings.push(m ?? '') } as typeof silentLogger;
    const a = new RuntimeAvailability({ node: 'n', logger });
    expect(a.current).toEqual({ available: false, error: 'not started' });
    a.down(new Error('gone'));
    a.down(new Error('still gone'));
    expect(warnings).toHaveLength(1);
    expect(a.current).toEqual({ available: false, error: 'still gone' });
    expect(a.up()).toBe(true);
    expect(a.up()).toBe(false);
    a.down(new Error('again'));
    expect(warnings).toHaveLength(2);
  });
});

describe('traffic channel', () => {
  it('answers from the routing controller once it is made, and only from one', () => {
    const channel = new TrafficChannel();
    expect(channel.traffic()).toBeUndefined();
    const proxy = { switchAnswers: async () => undefined, openConnections: async () => 0 };
    channel.answerFrom(proxy);
    expect(channel.traffic()).toBe(proxy);
    expect(() => channel.answerFrom(proxy)).toThrow(/already/);
  });
});

describe('volume removal', () => {
  const setup = (o: { wanted?: boolean; failures?: number } = {}) => {
    let failures = o.failures ?? 0;
    const removed: string[] = [];
    const runtime = {
      remove: async (id: string) => void removed.push(id),
      listVolumes: async () => [
        { name: 'svc-data', labels: { 'tether.volume': 'data' } },
        { name: 'svc-logs', labels: { 'tether.volume': 'logs' } },
      ],
      removeVolume: async (name: string) => {
        if (failures-- > 0) throw new Error('docker away');
        removed.push(name);
      },
    } as unknown as ContainerRuntime;
    const reader = { read: async () => [{ actual: { id: 'c1' } }], invalidate: () => undefined } as never;
    const lanes: Promise<void>[] = [];
    const removals = new PendingRemovals();
    const removal = new VolumeRemoval({
      runtime,
      node: 'n',
      reader,
      removals,
      inventory: undefined,
      callTimeoutMs: 100,
      retryMinMs: 20,
      logger: silentLogger,
      wanted: () => o.wanted ?? false,
      stopped: () => false,
      enqueue: (_serviceId, work) => void lanes.push(work()),
    });
    return { removal, removed, removals, lanes };
  };

  it('removes the containers, then the named volumes only; done once removed', async () => {
    const { removal, removed, removals, lanes } = setup();
    await removal.request('svc', ['data']);
    await Promise.all(lanes);
    expect(removed).toEqual(['c1', 'svc-data']);
    expect(await removals.load()).toEqual([]);
  });

  it('dropped when the service runs on the node again', async () => {
    const { removal, removed, lanes } = setup({ wanted: true });
    await removal.request('svc');
    await Promise.all(lanes);
    expect(removed).toEqual([]);
  });

  it('retried after a failure, after its backoff (not before)', async () => {
    const { removal, removed, lanes } = setup({ failures: 1 });
    const started = Date.now();
    await removal.request('svc');
    await vi.waitFor(() => expect(removed).toContain('svc-logs'), { timeout: 2_000, interval: 5 });
    await Promise.all(lanes);
    expect(Date.now() - started).toBeGreaterThanOrEqual(20);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
