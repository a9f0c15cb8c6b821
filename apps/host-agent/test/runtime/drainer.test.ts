import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { silentLogger } from '@tether/common';
import type { Workload } from '@tether/protocol';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { DrainReport, ProxyTraffic } from '../../src/controllers.js';
import { DrainBook } from '../../src/runtime/drain-book.js';
import { DRAIN_POLL_MS, Drainer } from '../../src/runtime/drainer.js';

// The drain's decisions on fake timers: when the old containers are stopped
// (count 0, or the deadline), what is reported, and what survives a restart.

const workload: Workload = { serviceId: 'svc_a', serviceName: 'a', deploymentId: 'dep_2', image: 'x', env: {}, port: 8080, replicas: 1 };
const old = [{ id: 'c1aaaaaaaaaaaaaa', name: 'tether-n-svc_a-dep_1-0' }];

/** A proxy whose open count the test sets; every count it was asked, and every switch. */
function fakeTraffic(open: { n: number | Error }) {
  const asked: number[] = [];
  const traffic: ProxyTraffic & { switches: number } = {
    switches: 0,
    async switchAnswers() {
      traffic.switches += 1;
    },
    async openConnections() {
      asked.push(Date.now());
      if (open.n instanceof Error) throw open.n;
      return open.n;
    },
  };
  return { traffic, asked };
}

function setup(traffic: ProxyTraffic | undefined, book = new DrainBook()) {
  const retired: { id: string; at: number }[] = [];
  const reports: DrainReport[] = [];
  const drainer = new Drainer({
    book,
    traffic: () => traffic,
    retire: async (c) => void retired.push({ id: c.id, at: Date.now() }),
    report: (r) => reports.push(r),
    logger: silentLogger,
  });
  return { drainer, retired, reports, book };
}

/** Runs `fn` in a fresh directory, removed after. */
async function inTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'drains-'));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A first agent run that records a drain in `file` and stops `afterMs` into it, leaving the drain on disk. */
async function leftOnDisk(file: string, open: { n: number | Error }, drainSeconds: number, afterMs: number, allocationIds?: string[]) {
  const first = setup(fakeTraffic(open).traffic, new DrainBook({ file, logger: silentLogger }));
  first.drainer.follow(await first.drainer.switchAway(workload, old, drainSeconds, allocationIds));
  await vi.advanceTimersByTimeAsync(afterMs);
  await first.drainer.stop();
  return first;
}

describe('drainer', () => {
  beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => vi.useRealTimers());

  it('per container: open connections keep the old container until the deadline, then it is stopped and the count is the cut', async () => {
    const open = { n: 2 as number | Error };
    const { traffic } = fakeTraffic(open);
    const { drainer, retired, reports, book } = setup(traffic);
    const record = await drainer.switchAway(workload, old, 8);
    expect(traffic.switches).toBe(1);
    expect(record).toMatchObject({ openAtSwitch: 2, switchedAt: 1_000_000, deadline: 1_008_000 });
    expect(drainer.draining().has(old[0]!.id)).toBe(true);
    drainer.follow(record);
    await vi.advanceTimersByTimeAsync(7_900);
    expect(retired).toEqual([]);
    open.n = 1;
    await vi.advanceTimersByTimeAsync(200);
    expect(retired).toEqual([{ id: old[0]!.id, at: 1_008_000 }]);
    expect(reports).toEqual([{ deploymentId: 'dep_2', connectionsOpenAtSwitch: 2, connectionsCut: 1, drainEndedAt: new Date(1_008_000).toISOString() }]);
    expect(book.has('dep_2')).toBe(false);
    expect(drainer.draining().size).toBe(0);
    expect(drainer.stats).toEqual({ ended: 1, connectionsCut: 1 });
  });

  it('per container: the last connection closing ends the drain within one poll, cut 0', async () => {
    const open = { n: 1 as number | Error };
    const { traffic } = fakeTraffic(open);
    const { drainer, retired, reports } = setup(traffic);
    drainer.follow(await drainer.switchAway(workload, old, 3600));
    await vi.advanceTimersByTimeAsync(3_000);
    expect(retired).toEqual([]);
    open.n = 0;
    await vi.advanceTimersByTimeAsync(DRAIN_POLL_MS);
    expect(retired.map((r) => r.at - 1_000_000)).toEqual([3_000 + DRAIN_POLL_MS]);
    expect(reports[0]).toMatchObject({ connectionsOpenAtSwitch: 1, connectionsCut: 0 });
  });

  it('drainSeconds 0: stopped at the switch, what was open is cut', async () => {
    const { traffic } = fakeTraffic({ n: 3 });
    const { drainer, retired, reports } = setup(traffic);
    drainer.follow(await drainer.switchAway(workload, old, 0));
    await vi.advanceTimersByTimeAsync(0);
    expect(retired.map((r) => r.at)).toEqual([1_000_000]);
    expect(reports[0]).toMatchObject({ connectionsOpenAtSwitch: 3, connectionsCut: 3 });
  });

  it('a proxy that cannot be read: the whole drainSeconds, cut unknown', async () => {
    const { traffic } = fakeTraffic({ n: new Error('PROXY_UNREACHABLE') });
    const { drainer, retired, reports } = setup(traffic);
    drainer.follow(await drainer.switchAway(workload, old, 5));
    await vi.advanceTimersByTimeAsync(4_900);
    expect(retired).toEqual([]);
    await vi.advanceTimersByTimeAsync(200);
    expect(retired.map((r) => r.at - 1_000_000)).toEqual([5_000]);
    expect(reports[0]).toMatchObject({ connectionsOpenAtSwitch: null, connectionsCut: null });
  });

  it('no proxy: nothing proxied, 0 and 0 at once', async () => {
    const { drainer, retired, reports } = setup(undefined);
    drainer.follow(await drainer.switchAway(workload, old, 30));
    await vi.advanceTimersByTimeAsync(0);
    expect(retired).toHaveLength(1);
    expect(reports[0]).toMatchObject({ connectionsOpenAtSwitch: 0, connectionsCut: 0 });
  });

  it('nothing replaced: 0 and 0 after the running result (next turn), and a redelivery knows it', async () => {
    const { drainer, reports } = setup(undefined);
    drainer.reportNothing('dep_9');
    expect(reports).toEqual([]);
    await vi.advanceTimersByTimeAsync(0);
    expect(reports).toEqual([{ deploymentId: 'dep_9', connectionsOpenAtSwitch: 0, connectionsCut: 0, drainEndedAt: new Date(1_000_000).toISOString() }]);
    expect(drainer.knows('dep_9')).toBe(true);
    expect(drainer.knows('dep_10')).toBe(false);
  });

  it('two drains of one deployment (a second rollout adopted a leftover): the first ending leaves the second draining', async () => {
    const { traffic } = fakeTraffic({ n: 1 });
    const { drainer, retired, book } = setup(traffic);
    drainer.follow(await drainer.switchAway(workload, old, 2));
    await vi.advanceTimersByTimeAsync(1_000);
    const leftover = [{ id: 'c2bbbbbbbbbbbbbb', name: 'tether-n-svc_a-dep_0-0' }];
    drainer.follow(await drainer.switchAway(workload, leftover, 5));
    await vi.advanceTimersByTimeAsync(1_100);
    expect(retired.map((r) => r.id)).toEqual([old[0]!.id]);
    expect(drainer.draining().has(leftover[0]!.id)).toBe(true);
    expect(book.has('dep_2')).toBe(true);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(retired.map((r) => r.id)).toEqual([old[0]!.id, leftover[0]!.id]);
    expect(book.has('dep_2')).toBe(false);
  });

  it('a stopped agent leaves the drain on disk; the next run resumes it and stops at the same deadline', async () => {
    await inTempDir(async (dir) => {
      const file = path.join(dir, 'drains.json');
      const open = { n: 1 as number | Error };
      const first = await leftOnDisk(file, open, 8, 3_000);
      expect(first.retired).toEqual([]);
      expect(JSON.parse(await readFile(file, 'utf8')).drains).toHaveLength(1);

      const book = new DrainBook({ file, logger: silentLogger });
      const second = setup(fakeTraffic(open).traffic, book);
      const records = await book.load();
      expect(records).toEqual([{ deploymentId: 'dep_2', serviceId: 'svc_a', containers: old, switchedAt: 1_000_000, deadline: 1_008_000, openAtSwitch: 1 }]);
      expect(second.drainer.draining().has(old[0]!.id)).toBe(true);
      for (const r of records) second.drainer.follow(r);
      await vi.advanceTimersByTimeAsync(4_900);
      expect(second.retired).toEqual([]);
      await vi.advanceTimersByTimeAsync(200);
      expect(second.retired.map((r) => r.at - 1_000_000)).toEqual([8_000]);
      // The report follows the state file's write (real I/O).
      await vi.waitFor(() => expect(second.reports[0]).toMatchObject({ deploymentId: 'dep_2', connectionsOpenAtSwitch: 1, connectionsCut: 1 }));
      expect(JSON.parse(await readFile(file, 'utf8')).drains).toEqual([]);
    });
  });
  it('an allocation rollout\'s drain keeps its allocations across a restart and reports them (allocations.drained), never marking the deployment', async () => {
    await inTempDir(async (dir) => {
      const file = path.join(dir, 'allocation-drains.json');
      const open = { n: 1 as number | Error };
      await leftOnDisk(file, open, 4, 1_000, ['alc_2', 'alc_1']);

      const book = new DrainBook({ file, logger: silentLogger });
      const second = setup(fakeTraffic(open).traffic, book);
      const records = await book.load();
      expect(records).toEqual([{ deploymentId: 'dep_2', serviceId: 'svc_a', containers: old, switchedAt: 1_000_000, deadline: 1_004_000, openAtSwitch: 1, allocationIds: ['alc_2', 'alc_1'] }]);
      for (const r of records) second.drainer.follow(r);
      await vi.advanceTimersByTimeAsync(3_100);
      await vi.waitFor(() => expect(second.reports).toEqual([{ deploymentId: 'dep_2', allocationIds: ['alc_2', 'alc_1'], connectionsOpenAtSwitch: 1, connectionsCut: 1, drainEndedAt: expect.any(String) }]));
      expect(second.retired.map((r) => r.at - 1_000_000)).toEqual([4_000]);
      // It is no deploy's drain: a redelivery of the deployment would still report its own.
      expect(second.drainer.knows('dep_2')).toBe(false);
      second.drainer.reportNothing('dep_3', ['alc_1']);
      await vi.advanceTimersByTimeAsync(1);
      expect(second.reports[1]).toMatchObject({ deploymentId: 'dep_3', allocationIds: ['alc_1'], connectionsOpenAtSwitch: 0, connectionsCut: 0 });
      expect(second.drainer.knows('dep_3')).toBe(false);
    });
  });
});
