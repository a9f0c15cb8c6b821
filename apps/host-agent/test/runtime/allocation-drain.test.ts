import { ensureDocker, waitFor } from '@tether/testkit';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import type { AllocationStatus, Release } from '@tether/protocol';
import type { DrainReport, ProxyTraffic } from '../../src/controllers.js';
import { TEST_TIMING, useHarness } from './support/harness.js';

// Drains of allocations (release with drainSeconds) against a real engine, with the proxy's side scripted: the
// test says how many connections are open on the old containers. A removed allocation's container leaves the
// answers at once, reads `draining`, keeps running while something is open and drainSeconds has not passed,
// then stops and goes; a rollout's old container stops as soon as nothing is open on it. Neither sends
// deploy.drained (that answers only a deploy); each rollout's drain is reported with its allocations
// (allocations.drained), the removed allocation's never.

const docker = await ensureDocker();

describe.skipIf(!docker.available)('runtime: allocation drains', () => {
  const h = useHarness('alloc-drain');
  const open = { count: 0 };
  let switches = 0;
  const traffic: ProxyTraffic = {
    switchAnswers: () => {
      switches++;
      return Promise.resolve();
    },
    openConnections: () => Promise.resolve(open.count),
  };
  const release = (deploymentId: string, drainSeconds: number): Release => {
    const { replicas: _replicas, ...spec } = h.workload('drained', deploymentId, { env: { MESSAGE: deploymentId }, drainSeconds });
    return spec;
  };

  it('a removed allocation drains until drainSeconds with a connection open, a rollout\'s old container stops once none is', async () => {
    const drained: DrainReport[] = [];
    const heard: AllocationStatus[][] = [];
    const controller = h.controller({ logger: silentLogger, traffic: () => traffic, onDrained: (r) => drained.push(r) });
    controller.onAllocationStatus(() => heard.push(controller.allocationStatus() ?? []));
    const reports: DrainReport[] = [];
    controller.onReport((r) => (r.kind === 'drained' ? reports.push(r.drain) : undefined));
    await controller.start();
    const both = { id: 's1', releases: [release('dr-d1', 2)], allocations: [{ allocationId: 'alc-1', serviceId: 'drained', deploymentId: 'dr-d1' }, { allocationId: 'alc-2', serviceId: 'drained', deploymentId: 'dr-d1' }] };
    controller.setAllocations(both);
    await waitFor(() => controller.allocationStatus()?.every((s) => s.state === 'running'), { timeoutMs: 10_000, intervalMs: 25, message: 'both running' });
    const [gone] = (await h.containers()).filter((c) => c.labels['tether.allocation'] === 'alc-2');

    // alc-2 removed while one connection is open on it: out of the answers at once, stopped at drainSeconds (2 s).
    open.count = 1;
    const removedAt = Date.now();
    controller.setAllocations({ ...both, id: 's2', allocations: both.allocations.slice(0, 1) });
    await waitFor(() => controller.notServing().has(gone!.id), { timeoutMs: 2_000, intervalMs: 10, message: 'out of the answers' });
    const outMs = Date.now() - removedAt;
    expect(switches).toBeGreaterThanOrEqual(1);
    await waitFor(() => controller.allocationStatus()?.some((s) => s.allocationId === 'alc-2' && s.state === 'draining'), { timeoutMs: 2_000, intervalMs: 10, message: 'alc-2 draining' });
    await waitFor(async () => !(await h.containers()).some((c) => c.id === gone!.id), { timeoutMs: 2_000 + TEST_TIMING.stopTimeoutMs + 3_000, intervalMs: 25, message: 'drained container removed' });
    const goneMs = Date.now() - removedAt;
    console.log(`allocation drain: out of the answers after ${outMs} ms, removed after ${goneMs} ms (drainSeconds 2, one connection open)`);
    expect(outMs).toBeLessThan(1_000);
    expect(goneMs).toBeGreaterThanOrEqual(2_000);
    expect(goneMs).toBeLessThan(2_000 + TEST_TIMING.stopTimeoutMs + 2_000);
    await waitFor(() => controller.allocationStatus()?.length === 1, { timeoutMs: 1_000, message: 'alc-2 left the status' });
    expect(controller.notServing().has(gone!.id)).toBe(false);

    // A new release for alc-1: its old container switches away and, with nothing open, stops at once (not after 2 s).
    const [old] = await h.containers();
    open.count = 0;
    controller.setAllocations({ id: 's3', releases: [release('dr-d2', 2)], allocations: [{ allocationId: 'alc-1', serviceId: 'drained', deploymentId: 'dr-d2' }] });
    await waitFor(() => controller.allocationStatus()?.[0]?.runningDeploymentId === 'dr-d2' && controller.allocationStatus()?.[0]?.state === 'running', { timeoutMs: 10_000, intervalMs: 25, message: 'alc-1 on dr-d2' });
    const switchedAt = Date.now();
    await waitFor(async () => !(await h.containers()).some((c) => c.id === old!.id), { timeoutMs: TEST_TIMING.stopTimeoutMs + 2_000, intervalMs: 25, message: 'old container removed' });
    const oldGoneMs = Date.now() - switchedAt;
    console.log(`allocation rollout drain: old container removed ${oldGoneMs} ms after the new release read running (nothing open)`);
    expect(oldGoneMs).toBeLessThan(1_500);
    expect(heard.flat().some((s) => s.allocationId === 'alc-1' && s.state === 'draining')).toBe(false);
    expect(drained).toEqual([]);
    // The first rollout replaced nothing, the second nothing was open on: 0 and 0 each; alc-2's removal is not there.
    await waitFor(() => reports.length === 2, { timeoutMs: 1_000, message: 'both rollouts reported' });
    expect(reports.map((r) => ({ ...r, allocationIds: [...(r.allocationIds ?? [])].sort(), drainEndedAt: typeof r.drainEndedAt }))).toEqual([
      { deploymentId: 'dr-d1', allocationIds: ['alc-1', 'alc-2'], connectionsOpenAtSwitch: 0, connectionsCut: 0, drainEndedAt: 'string' },
      { deploymentId: 'dr-d2', allocationIds: ['alc-1'], connectionsOpenAtSwitch: 0, connectionsCut: 0, drainEndedAt: 'string' },
    ]);
  });

});

// Issue 38: a node back from a partition gets a set without the allocations failover re-placed elsewhere.
describe.skipIf(!docker.available)('runtime: containers a set disowns', () => {
  const h = useHarness('alloc-disown');
  let switches = 0;
  const traffic: ProxyTraffic = {
    switchAnswers: () => {
      switches++;
      return Promise.resolve();
    },
    openConnections: () => Promise.resolve(0),
  };

  it('a set without a running container\'s allocation takes it out of the answers on arrival, before any pass; it is stopped after TETHER_DRAIN_MS', async () => {
    const controller = h.controller({ logger: silentLogger, traffic: () => traffic });
    await controller.start();
    const { replicas: _replicas, ...plain } = h.workload('plain', 'pl-d1', { env: { MESSAGE: 'pl-d1' } });
    const both = { id: 'p1', releases: [plain], allocations: [{ allocationId: 'alp-1', serviceId: 'plain', deploymentId: 'pl-d1' }, { allocationId: 'alp-2', serviceId: 'plain', deploymentId: 'pl-d1' }] };
    controller.setAllocations(both);
    await waitFor(() => controller.allocationStatus()?.every((s) => s.state === 'running'), { timeoutMs: 10_000, intervalMs: 25, message: 'both running' });
    // The heartbeat's read: the executor knows the containers as they run now.
    await controller.observe();
    const [gone] = (await h.containers()).filter((c) => c.labels['tether.allocation'] === 'alp-2');
    const before = switches;
    const removedAt = Date.now();
    // Its allocation re-placed elsewhere (a node back from a partition): out of the answers as the set arrives.
    controller.setAllocations({ ...both, id: 'p2', allocations: both.allocations.slice(0, 1) });
    expect(controller.notServing().has(gone!.id)).toBe(true);
    expect(switches).toBe(before + 1);
    await waitFor(async () => !(await h.containers()).some((c) => c.id === gone!.id), { timeoutMs: TEST_TIMING.drainMs + TEST_TIMING.stopTimeoutMs + 3_000, intervalMs: 25, message: 'removed' });
    const goneMs = Date.now() - removedAt;
    console.log(`disowned container: out of the answers at the set's arrival, removed after ${goneMs} ms (TETHER_DRAIN_MS ${TEST_TIMING.drainMs})`);
    expect(goneMs).toBeGreaterThanOrEqual(TEST_TIMING.drainMs);
    expect(controller.notServing().has(gone!.id)).toBe(false);
  });
});
