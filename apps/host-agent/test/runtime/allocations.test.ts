import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ensureDocker, sleep, waitFor } from '@tether/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import type { Allocation, AllocationStatus, Release } from '@tether/protocol';
import { silentLogger } from '@tether/common';
import { LABELS } from '../../src/docker/docker-client.js';
import type { AllocationSet } from '../../src/controllers.js';
import type { DockerWorkloadController } from '../../src/runtime/docker-workload-controller.js';
import { TEST_TIMING, useHarness, type RuntimeHarness } from './support/harness.js';

// Allocations (capability workload.allocations) carried out against a real Docker engine: one labelled
// container per allocation, a new release rolled out health-gated (new healthy before old stops), a failing
// release leaving the old one serving, a removed allocation drained and removed alone, and containers placed
// by `deploy` before the upgrade adopted (same ids) across an agent restart.

const docker = await ensureDocker();

interface DockerEvent {
  Type: string;
  Action: string;
  time: number;
  timeNano: number;
  Actor: { ID: string; Attributes: Record<string, string> };
}

async function dockerEvents(h: RuntimeHarness, since: number): Promise<DockerEvent[]> {
  const stream = await h.docker.getEvents({ since, until: Math.ceil(Date.now() / 1000) + 1, filters: { type: ['container'], label: [`${LABELS.node}=${h.node}`] } });
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as DockerEvent);
}

describe.skipIf(!docker.available)('runtime: allocations on a real engine', () => {
  const h = useHarness('alloc');
  let stateDir = '';
  let controller: DockerWorkloadController;
  const heard: { at: number; statuses: AllocationStatus[] }[] = [];
  afterAll(() => rm(stateDir, { recursive: true, force: true }));

  const release = (deploymentId: string, env: Record<string, string>, serviceId = 'web'): Release => {
    const { replicas: _replicas, ...spec } = h.workload(serviceId, deploymentId, { image: h.images.webHealthcheck, env });
    return spec;
  };
  const alloc = (allocationId: string, deploymentId: string, serviceId = 'web'): Allocation => ({ allocationId, serviceId, deploymentId });
  const start = async (privateAddress?: string) => {
    stateDir ||= await mkdtemp(path.join(os.tmpdir(), 'tether-alloc-'));
    const c = h.controller({ logger: silentLogger, ...(privateAddress ? { privateAddress } : {}), allocationsFile: path.join(stateDir, 'allocations.json'), allocationDrainsFile: path.join(stateDir, 'allocation-drains.json') });
    c.onAllocationStatus(() => heard.push({ at: Date.now(), statuses: c.allocationStatus() ?? [] }));
    await c.start();
    return c;
  };
  const byId = (statuses: AllocationStatus[] | null | undefined) => new Map((statuses ?? []).map((s) => [s.allocationId, s]));
  /** Applies a set; resolves once every allocation of it reads `state` (bounded), with the time it took. */
  const applyUntil = async (set: AllocationSet, done: (s: AllocationStatus) => boolean, timeoutMs = 20_000) => {
    const started = Date.now();
    controller.setAllocations(set);
    await waitFor(
      () => {
        const now = byId(controller.allocationStatus());
        return set.allocations.every((a) => { const s = now.get(a.allocationId); return s !== undefined && s.deploymentId === a.deploymentId && done(s); });
      },
      { timeoutMs, intervalMs: 25, message: `set ${set.id} applied: ${JSON.stringify(controller.allocationStatus())}` },
    );
    return Date.now() - started;
  };
  const web = async () => (await h.containers()).filter((c) => c.labels[LABELS.service] === 'web');

  it('a set of two allocations of one service makes two labelled containers, both reported running', async () => {
    controller = await start();
    const ms = await applyUntil({ id: 'set-1', releases: [release('web-d1', { MESSAGE: 'ok-1' })], allocations: [alloc('alc-a', 'web-d1'), alloc('alc-b', 'web-d1')] }, (s) => s.state === 'running');
    const containers = await web();
    expect(containers.map((c) => c.labels[LABELS.allocation]).sort()).toEqual(['alc-a', 'alc-b']);
    for (const c of containers) {
      expect(c.labels[LABELS.deployment]).toBe('web-d1');
      expect(c.labels[LABELS.replica]).toBeUndefined();
      expect(c.name).toBe(`tether-${h.node}-web-web-d1-${c.labels[LABELS.allocation]}`);
    }
    const status = byId(controller.allocationStatus());
    for (const c of containers) {
      expect(status.get(c.labels[LABELS.allocation]!)).toMatchObject({ state: 'running', runningDeploymentId: 'web-d1', containerId: c.id, code: null, reason: null, imageRef: expect.stringMatching(/^sha256:/) });
    }
    // Ready means healthy: the image's HEALTHCHECK probes every 200 ms, so never faster than one probe.
    console.log(`allocations: set of 2 running after ${ms} ms`);
    expect(ms).toBeGreaterThanOrEqual(200);
    expect(ms).toBeLessThan(TEST_TIMING.startTimeoutMs);
    expect(await h.viaAlias('web')).toBe('ok-1');
    // Heartbeats' container states carry the allocation.
    const observed = await controller.observe();
    expect(observed.containers.map((c) => c.allocationId).sort()).toEqual(['alc-a', 'alc-b']);
  });

  it('a new release on both rolls out: each new container is healthy before any old one stops', async () => {
    const old = await web();
    const since = Math.floor(Date.now() / 1000) - 1;
    const from = heard.length;
    const ms = await applyUntil({ id: 'set-2', releases: [release('web-d2', { MESSAGE: 'ok-2' })], allocations: [alloc('alc-a', 'web-d2'), alloc('alc-b', 'web-d2')] }, (s) => s.state === 'running' && s.runningDeploymentId === 'web-d2');
    // The old ones go within drain + stop grace after the switch.
    await waitFor(async () => (await web()).every((c) => c.labels[LABELS.deployment] === 'web-d2'), { timeoutMs: TEST_TIMING.drainMs + TEST_TIMING.stopTimeoutMs + 3_000, message: 'old containers removed' });
    const now = await web();
    expect(now).toHaveLength(2);
    expect(now.some((c) => old.some((o) => o.id === c.id))).toBe(false);
    const events = await dockerEvents(h, since);
    const healthy = now.map((c) => events.find((e) => e.Actor.ID === c.id && e.Action === 'health_status: healthy')?.timeNano ?? Infinity);
    for (const o of old) {
      const died = events.find((e) => e.Actor.ID === o.id && e.Action === 'die')?.timeNano;
      expect(died).toBeDefined();
      for (const t of healthy) expect(t).toBeLessThan(died!);
    }
    // The status went through the rollout (pending or starting) before running on the new release.
    const during = heard.slice(from).flatMap((x) => x.statuses).filter((s) => s.deploymentId === 'web-d2');
    expect(during.some((s) => s.state === 'pending' || s.state === 'starting')).toBe(true);
    console.log(`allocations: release web-d2 on 2 allocations running after ${ms} ms`);
    expect(ms).toBeGreaterThanOrEqual(200);
    expect(ms).toBeLessThan(TEST_TIMING.startTimeoutMs + 2_000);
    expect(await h.viaAlias('web')).toBe('ok-2');
  });

  it('a release that fails its health check leaves the old release serving, reports failed with the reason, and is not tried again', async () => {
    const before = await web();
    const since = Math.floor(Date.now() / 1000) - 1;
    const ms = await applyUntil({ id: 'set-3', releases: [release('web-d3', { MESSAGE: 'ok-3', UNHEALTHY: '1' })], allocations: [alloc('alc-a', 'web-d3'), alloc('alc-b', 'web-d3')] }, (s) => s.state === 'failed');
    const status = byId(controller.allocationStatus());
    for (const c of before) {
      expect(status.get(c.labels[LABELS.allocation]!)).toMatchObject({
        state: 'failed',
        deploymentId: 'web-d3',
        runningDeploymentId: 'web-d2',
        containerId: c.id,
        code: 'HEALTHCHECK_FAILED',
        reason: expect.stringContaining('probe says unhealthy'),
      });
    }
    console.log(`allocations: failing release reported failed after ${ms} ms`);
    // Unhealthy needs two failed probes 200 ms apart; bounded by the start timeout.
    expect(ms).toBeGreaterThanOrEqual(400);
    expect(ms).toBeLessThan(TEST_TIMING.startTimeoutMs);
    await sleep(1_500);
    expect((await web()).map((c) => c.id).sort()).toEqual(before.map((c) => c.id).sort());
    const created = (await dockerEvents(h, since)).filter((e) => e.Action === 'create' && e.Actor.Attributes[LABELS.deployment] === 'web-d3');
    expect(created).toHaveLength(2);
    expect(await h.viaAlias('web')).toBe('ok-2');
  });

  it('removing one allocation drains and removes exactly its container; the other is untouched', async () => {
    const before = await web();
    const keep = before.find((c) => c.labels[LABELS.allocation] === 'alc-a')!;
    const gone = before.find((c) => c.labels[LABELS.allocation] === 'alc-b')!;
    const from = heard.length;
    const started = Date.now();
    controller.setAllocations({ id: 'set-4', releases: [release('web-d2', { MESSAGE: 'ok-2' })], allocations: [alloc('alc-a', 'web-d2')] });
    await waitFor(async () => !(await web()).some((c) => c.id === gone.id), { timeoutMs: TEST_TIMING.drainMs + TEST_TIMING.stopTimeoutMs + 3_000, intervalMs: 25, message: 'removed allocation\'s container gone' });
    const ms = Date.now() - started;
    console.log(`allocations: removed allocation's container gone after ${ms} ms`);
    // It is stopped only after TETHER_DRAIN_MS on the network.
    expect(ms).toBeGreaterThanOrEqual(TEST_TIMING.drainMs);
    expect((await web()).map((c) => c.id)).toEqual([keep.id]);
    const draining = heard.slice(from).flatMap((x) => x.statuses).find((s) => s.allocationId === 'alc-b' && s.state === 'draining');
    expect(draining).toMatchObject({ containerId: gone.id, deploymentId: 'web-d2' });
    await waitFor(() => (controller.allocationStatus() ?? []).length === 1, { timeoutMs: 2_000, message: 'alc-b left the status' });
    expect(controller.allocationStatus()).toEqual([expect.objectContaining({ allocationId: 'alc-a', state: 'running', containerId: keep.id })]);
  });

  it('containers placed by deploy before the upgrade are adopted (same ids, nothing restarted), also after an agent restart', async () => {
    await h.stopControllers();
    const [keep] = await web();
    // An agent before the upgrade: the panel deployed "legacy" with two replica slots.
    controller = await start();
    const legacy = { ...h.workload('legacy', 'leg-d1', { image: h.images.webHealthcheck, env: { MESSAGE: 'ok-legacy' } }), replicas: 2 };
    expect(await controller.deploy(legacy)).toMatchObject({ status: 'running' });
    const placed = (await h.containers()).filter((c) => c.labels[LABELS.service] === 'legacy');
    expect(placed).toHaveLength(2);
    expect(placed.every((c) => c.labels[LABELS.allocation] === undefined)).toBe(true);

    const since = Math.floor(Date.now() / 1000) - 1;
    const sinceMs = Date.now();
    const set: AllocationSet = {
      id: 'set-5',
      releases: [release('web-d2', { MESSAGE: 'ok-2' }), release('leg-d1', { MESSAGE: 'ok-legacy' }, 'legacy')],
      allocations: [alloc('alc-a', 'web-d2'), alloc('alc-l1', 'leg-d1', 'legacy'), alloc('alc-l2', 'leg-d1', 'legacy')],
    };
    const adoptMs = await applyUntil(set, (s) => s.state === 'running');
    const ids = () => h.containers().then((cs) => cs.map((c) => c.id).sort());
    const expected = [keep!.id, ...placed.map((c) => c.id)].sort();
    expect(await ids()).toEqual(expected);
    const status = byId(controller.allocationStatus());
    expect(new Set([status.get('alc-l1')?.containerId, status.get('alc-l2')?.containerId])).toEqual(new Set(placed.map((c) => c.id)));
    // The book is written after the status reads running (a whole CI run once read it a moment too early).
    const bound = { 'alc-l1': status.get('alc-l1')!.containerId, 'alc-l2': status.get('alc-l2')!.containerId };
    const bookHolds = async () => {
      const book = JSON.parse(await readFile(path.join(stateDir, 'allocations.json'), 'utf8')) as { bindings: Record<string, string> };
      return Object.entries(bound).every(([id, container]) => book.bindings[id] === container);
    };
    await waitFor(bookHolds, { timeoutMs: 2_000, intervalMs: 20, message: 'allocations.json binds alc-l1 and alc-l2 to the adopted containers' });

    // The agent restarts: the same set binds the same containers again (the labels and allocations.json).
    await h.stopControllers();
    controller = await start();
    const restartMs = await applyUntil({ ...set, id: 'set-6' }, (s) => s.state === 'running');
    await sleep(1_000);
    expect(await ids()).toEqual(expected);
    expect(byId(controller.allocationStatus()).get('alc-l1')?.containerId).toBe(status.get('alc-l1')?.containerId);
    const changes = (await dockerEvents(h, since)).filter((e) => e.timeNano / 1e6 >= sinceMs && ['create', 'start', 'die', 'kill', 'stop', 'destroy'].includes(e.Action));
    expect(changes).toEqual([]);
    console.log(`allocations: adoption read running after ${adoptMs} ms, after an agent restart ${restartMs} ms; no container created, started or stopped`);
    expect(adoptMs).toBeLessThan(5_000);
    expect(restartMs).toBeLessThan(5_000);
    expect(await h.viaAlias('legacy')).toBe('ok-legacy');
  });

  it('routing.remote: with a private address (127.0.0.1) a new allocation publishes its port there only and reports it as its endpoint; containers made before keep running unpublished (endpoint null)', async () => {
    const before = byId(controller.allocationStatus());
    await h.stopControllers();
    const old = new Set((await h.containers()).map((c) => c.id));
    expect(old.size).toBe(3);
    const since = Math.floor(Date.now() / 1000) - 1;
    const sinceMs = Date.now();
    controller = await start('127.0.0.1');
    const set: AllocationSet = {
      id: 'set-7',
      releases: [release('web-d2', { MESSAGE: 'ok-2' }), release('leg-d1', { MESSAGE: 'ok-legacy' }, 'legacy')],
      allocations: [alloc('alc-a', 'web-d2'), alloc('alc-p', 'web-d2'), alloc('alc-l1', 'leg-d1', 'legacy'), alloc('alc-l2', 'leg-d1', 'legacy')],
    };
    const ms = await applyUntil(set, (s) => s.state === 'running' && (s.allocationId !== 'alc-p' || s.endpoint !== null));
    const status = byId(controller.allocationStatus());
    const published = status.get('alc-p')!;
    expect(published.endpoint).toMatch(/^127\.0\.0\.1:\d+$/);
    const port = Number(published.endpoint!.split(':')[1]);
    const info = await h.docker.getContainer(published.containerId!).inspect();
    // Docker picks the port (HostPort ""), on the private address and nowhere else.
    expect(info.HostConfig.PortBindings).toEqual({ '8080/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] });
    expect(info.NetworkSettings.Ports['8080/tcp']).toEqual([{ HostIp: '127.0.0.1', HostPort: String(port) }]);
    expect((await (await fetch(`http://${published.endpoint}/`, { signal: AbortSignal.timeout(2_000) })).text()).trim()).toBe('ok-2');
    // Another address of this host (Tether's network's gateway) has nothing on that port.
    const network = (await h.docker.getNetwork(h.network).inspect()) as { IPAM?: { Config?: { Gateway?: string }[] } };
    const gateway = network.IPAM?.Config?.[0]?.Gateway;
    expect(gateway).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    const elsewhere = await fetch(`http://${gateway}:${port}/`, { signal: AbortSignal.timeout(2_000) }).then(() => 'answered', (e: Error & { cause?: { code?: string } }) => e.cause?.code ?? e.message);
    expect(elsewhere).toBe('ECONNREFUSED');
    // Made before the address was set: bound again as they are, reported unpublished, never restarted.
    for (const allocationId of ['alc-a', 'alc-l1', 'alc-l2']) expect(status.get(allocationId)).toMatchObject({ state: 'running', endpoint: null, containerId: before.get(allocationId)!.containerId });
    const touched = (await dockerEvents(h, since)).filter((e) => e.timeNano / 1e6 >= sinceMs && old.has(e.Actor.ID) && ['start', 'die', 'kill', 'stop', 'destroy'].includes(e.Action));
    expect(touched).toEqual([]);
    console.log(`allocations: published allocation running with endpoint ${published.endpoint} after ${ms} ms`);
  });
});
