import { describe, expect, it } from 'vitest';
import { LABELS } from '../../src/docker/docker-client.js';
import type { ContainerDetails, ContainerRuntime, ContainerSummary } from '../../src/runtime/container-runtime.js';
import { ContainerReader, toContainerState } from '../../src/runtime/container-reader.js';
import { RUNTIME_ERROR_CODES, RuntimeError } from '../../src/runtime/errors.js';
import { nodeSelector } from '../../src/runtime/workload-spec.js';
import { containerDetails } from './support/container-details.js';

// The heartbeat's read path without Docker: how many calls it costs, and that it never answers from memory when it must not.

const labels = (id: string) => ({ ...nodeSelector('n1'), [LABELS.service]: `svc-${id}`, [LABELS.deployment]: 'd1', [LABELS.replica]: '0' });

function fakeRuntime(containers: Map<string, ContainerDetails>) {
  const calls = { list: 0, inspect: 0 };
  const runtime: Pick<ContainerRuntime, 'list' | 'inspect'> = {
    async list(): Promise<ContainerSummary[]> {
      calls.list++;
      return [...containers.values()].map((d) => ({ id: d.id, name: d.name, labels: d.labels, state: d.state, status: '' }));
    },
    async inspect(id) {
      calls.inspect++;
      const d = containers.get(id);
      if (!d) throw new RuntimeError(RUNTIME_ERROR_CODES.CONTAINER_NOT_FOUND, `no such container ${id}`);
      return { ...d };
    },
  };
  return { runtime: runtime as ContainerRuntime, calls };
}

const details = (id: string, over: Partial<ContainerDetails> = {}): ContainerDetails => containerDetails(id, { labels: labels(id), ...over });

describe('ContainerReader', () => {
  it('costs one list call per read in steady state while the event stream is open', async () => {
    const world = new Map([['a', details('a')], ['b', details('b')]]);
    const { runtime, calls } = fakeRuntime(world);
    const reader = new ContainerReader(runtime, 'n1');
    reader.setTrusted(true);
    await reader.read(1_000);
    await reader.read(1_000);
    await reader.read(1_000);
    expect(calls).toEqual({ list: 3, inspect: 2 });
  });

  it('reads details again when the listed state changed, when an event names the container, and always while the stream is down', async () => {
    const world = new Map([['a', details('a')]]);
    const { runtime, calls } = fakeRuntime(world);
    const reader = new ContainerReader(runtime, 'n1');
    reader.setTrusted(true);
    await reader.read(1_000);

    world.set('a', details('a', { state: 'exited', exitCode: 137, finishedAt: '2026-11-29T10:05:00.000Z' }));
    const [exited] = await reader.read(1_000);
    expect(toContainerState(exited!, 0)).toMatchObject({ state: 'exited', exitCode: 137, since: '2026-11-29T10:05:00.000Z' });
    expect(calls.inspect).toBe(2);

    // Restarted between two reads: the list says "running" both times, only the event tells.
    world.set('a', details('a', { startedAt: '2026-11-29T10:06:00.000Z' }));
    reader.invalidate('a');
    const [restarted] = await reader.read(1_000);
    expect(toContainerState(restarted!, 1)).toMatchObject({ state: 'running', restartCount: 1, since: '2026-11-29T10:06:00.000Z' });

    reader.setTrusted(false);
    await reader.read(1_000);
    await reader.read(1_000);
    expect(calls.inspect).toBe(5);
  });

  it('skips a container removed between the list and the inspect, and ignores containers without Tether identity', async () => {
    const world = new Map([['a', details('a')], ['x', details('x', { labels: nodeSelector('n1') })]]);
    const { runtime } = fakeRuntime(world);
    const reader = new ContainerReader(
      { ...runtime, inspect: async (id) => (id === 'a' ? Promise.reject(new RuntimeError(RUNTIME_ERROR_CODES.CONTAINER_NOT_FOUND, 'gone')) : runtime.inspect(id)) } as ContainerRuntime,
      'n1',
    );
    expect(await reader.read(1_000)).toEqual([]);
  });
});
