import { ensureDocker, waitFor } from '@tether/testkit';
import { describe, expect, it } from 'vitest';
import type { ContainerFailure } from '../../src/runtime/executor.js';
import { useHarness } from './support/harness.js';

// command/args (Kubernetes' meaning) and resources reach Docker as they should, read back with inspect;
// a container over its memory limit reads oomKilled and fails with OOM_KILLED.

const docker = await ensureDocker();

/** A web process written as a command: serves `text` on 8080 (the test image's httpd). */
const serve = (text: string) => `mkdir -p /tmp/w && echo ${text} > /tmp/w/index.html && exec httpd -f -p 8080 -h /tmp/w`;

describe.skipIf(!docker.available)('runtime: command, args and resources', () => {
  const h = useHarness('fields', { controllersPerTest: true });

  const inspectOnly = async (serviceId: string) => {
    const [c] = (await h.containers()).filter((x) => x.labels['tether.service'] === serviceId);
    expect(c).toBeDefined();
    return { id: c!.id, info: await h.docker.getContainer(c!.id).inspect() };
  };

  it('command replaces ENTRYPOINT and, alone, clears the image CMD; args replace CMD; limits are NanoCpus and Memory = MemorySwap', async () => {
    const controller = h.controller();
    await controller.start();
    // The image's CMD is the kit's web script: an answer other than its own proves what ran.
    const both = h.workload('both', 'both-d1', { command: ['sh', '-c'], args: [serve('from-args')], resources: { cpus: 0.5, memoryMiB: 64 } });
    const commandOnly = h.workload('cmd', 'cmd-d1', { command: ['sh', '-c', serve('from-command')] });
    const argsOnly = h.workload('args', 'args-d1', { args: ['sh', '-c', serve('from-args-only')] });
    for (const w of [both, commandOnly, argsOnly]) expect(await controller.deploy(w)).toMatchObject({ status: 'running' });

    const a = await inspectOnly('both');
    expect(a.info.Config.Entrypoint).toEqual(['sh', '-c']);
    expect(a.info.Config.Cmd).toEqual([serve('from-args')]);
    expect(a.info.HostConfig.NanoCpus).toBe(500_000_000);
    expect(a.info.HostConfig.Memory).toBe(64 * 1024 * 1024);
    expect(a.info.HostConfig.MemorySwap).toBe(64 * 1024 * 1024);
    expect(await h.httpGet(a.id)).toBe('from-args');

    const c = await inspectOnly('cmd');
    expect(c.info.Config.Entrypoint).toEqual(['sh', '-c', serve('from-command')]);
    // The image's CMD would be appended to the entrypoint as arguments: it must be gone.
    expect(c.info.Config.Cmd ?? []).toEqual([]);
    expect(c.info.HostConfig.Memory).toBe(0);
    expect(c.info.HostConfig.NanoCpus ?? 0).toBe(0);
    expect(await h.httpGet(c.id)).toBe('from-command');

    const g = await inspectOnly('args');
    expect(g.info.Config.Entrypoint ?? []).toEqual([]);
    expect(g.info.Config.Cmd).toEqual(['sh', '-c', serve('from-args-only')]);
    expect(await h.httpGet(g.id)).toBe('from-args-only');
  });

  it('a container that outgrows its memory limit during a rollout fails it with OOM_KILLED', async () => {
    const controller = h.controller();
    await controller.start();
    const hog = h.workload('hog', 'hog-d1', { command: ['sh', '-c', 'x=a; while true; do x=$x$x; done'], resources: { memoryMiB: 16 } });
    const outcome = await controller.deploy(hog);
    expect(outcome).toMatchObject({ status: 'failed', code: 'OOM_KILLED', reason: expect.stringContaining('out of memory') });
  });

  it('a running container killed for memory reads oomKilled with its restart count, and is reported OOM_KILLED past its budget', async () => {
    const reports: ContainerFailure[] = [];
    const controller = h.controller({ restart: { budget: 2, backoffInitialMs: 100, backoffMaxMs: 200 }, onFailure: (r) => reports.push(r) });
    await controller.start();
    // Serves long enough to pass the rollout (min ready 300 ms), then grows past 16 MiB.
    const late = h.workload('late', 'late-d1', { command: ['sh', '-c', 'sleep 1; x=a; while true; do x=$x$x; done'], resources: { memoryMiB: 16 } });
    expect(await controller.deploy(late)).toMatchObject({ status: 'running' });
    await waitFor(() => reports.length > 0, { timeoutMs: 20_000, message: 'OOM past the restart budget reported' });
    expect(reports[0]).toMatchObject({ serviceId: 'late', code: 'OOM_KILLED', reason: expect.stringContaining('out of memory') });
    const seen = (await controller.observe()).containers.filter((c) => c.serviceId === 'late');
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ state: 'exited', exitCode: 137, oomKilled: true, restartCount: 2 });
    const { info } = await inspectOnly('late');
    expect(info.State.OOMKilled).toBe(true);
  });

  it('a container that exits on its own does not read oomKilled', async () => {
    const controller = h.controller({ restart: { budget: 0, backoffInitialMs: 100, backoffMaxMs: 200 } });
    await controller.start();
    const quits = h.workload('quits', 'quits-d1', { command: ['sh', '-c', 'sleep 1; exit 3'], resources: { memoryMiB: 64 } });
    expect(await controller.deploy(quits)).toMatchObject({ status: 'running' });
    await waitFor(async () => (await controller.observe()).containers.some((c) => c.serviceId === 'quits' && c.state === 'exited'), { timeoutMs: 10_000, message: 'quits exited' });
    const [seen] = (await controller.observe()).containers.filter((c) => c.serviceId === 'quits');
    expect(seen).toMatchObject({ exitCode: 3 });
    expect(seen!.oomKilled).toBeUndefined();
  });
});
