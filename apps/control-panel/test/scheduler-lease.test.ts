import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import { SchedulerLease, StaleEpochError } from '../src/cluster/scheduler-lease.js';
import { TimelineFence } from '../src/cluster/timeline-fence.js';
import { SessionGenerations } from '../src/sessions/generations.js';
import { useMigratedDatabase } from './helpers/migrated-database.js';

// One scheduler among several panels (issue 36) on a real PostgreSQL: the
// lease row, its epoch that only grows (above every fencing floor after a
// database failover, issue 39), and writes that commit only under the epoch
// that holds the lease.

const LEASE_MS = 1_000;
const db = useMigratedDatabase();

const lease = (panelId: string) => new SchedulerLease({ prisma: db.prisma, panelId, leaseMs: LEASE_MS, logger: silentLogger });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const teamsNamed = async (prefix: string) => (await db.prisma.team.findMany({ where: { name: { startsWith: prefix } } })).map((t) => t.name).sort();

afterEach(async () => {
  await db.prisma.$executeRawUnsafe('DELETE FROM scheduler_lease');
  await db.prisma.$executeRawUnsafe('DELETE FROM fencing_floors');
});

describe('scheduler lease', () => {
  it('one holder at a time; another takes it only once it expired (not before), under the next epoch; the old epoch writes nothing', async () => {
    const [a, b, c] = [lease('panel-a'), lease('panel-b'), lease('panel-c')];
    await a.renew();
    await b.renew();
    await c.renew();
    expect([a.held, b.held, c.held]).toEqual([{ epoch: 1 }, null, null]);
    expect(await a.write(1, (tx) => tx.team.create({ data: { name: 'sl-a-1' } }))).toMatchObject({ name: 'sl-a-1' });

    // A renews once more, then stops (frozen). Half a lease later the row is still A's: B cannot take it.
    const frozenAt = performance.now();
    await a.renew();
    await sleep(LEASE_MS / 2);
    await b.renew();
    expect(b.held).toBeNull();
    // Past the lease, by the database's clock: B takes it under epoch 2.
    await sleep(LEASE_MS / 2 + 50);
    await b.renew();
    expect(b.held).toEqual({ epoch: 2 });
    expect(performance.now() - frozenAt).toBeGreaterThanOrEqual(LEASE_MS);
    // A, thawed, still believes nothing on its own clock (expired), and a write under epoch 1 is refused whole.
    expect(a.held).toBeNull();
    await expect(a.write(1, (tx) => tx.team.create({ data: { name: 'sl-a-stale' } }))).rejects.toBeInstanceOf(StaleEpochError);
    // A renewing now does not take B's live lease back.
    await a.renew();
    expect(a.held).toBeNull();
    await b.write(2, (tx) => tx.team.create({ data: { name: 'sl-b-2' } }));
    expect(await teamsNamed('sl-')).toEqual(['sl-a-1', 'sl-b-2']);
  });

  it('a renewal keeps the epoch; a panel that stops gives the lease up at once', async () => {
    const [a, b] = [lease('panel-a'), lease('panel-b')];
    await a.renew();
    await a.renew();
    expect(a.held).toEqual({ epoch: 1 });
    await a.stop();
    expect(a.held).toBeNull();
    await b.renew();
    expect(b.held).toEqual({ epoch: 2 });
  });

  it('after a database failover the next epoch is above every floor a panel recorded', async () => {
    const [a, b] = [lease('panel-a'), lease('panel-b')];
    await a.renew();
    expect(a.held).toEqual({ epoch: 1 });
    // A panel that held epoch 7 on the old timeline (its takeover lost in the promotion) reaches the new one.
    const fence = new TimelineFence({
      prisma: db.prisma,
      panelId: 'panel-z',
      generations: new SessionGenerations(),
      registry: { list: () => [] },
      claims: { claim: async () => undefined },
      logger: silentLogger,
      schedulerEpoch: () => 7,
    });
    fence.reached(2);
    await fence.settled();
    expect(fence.fencedTimeline).toBe(2);
    // The holder's renewal moves above the floor too: epoch 1 would repeat an epoch the old timeline gave out.
    await a.renew();
    expect(a.held).toEqual({ epoch: 8 });
    await a.stop();
    await b.renew();
    expect(b.held).toEqual({ epoch: 9 });
  });
});
