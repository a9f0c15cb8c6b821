import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES } from '@tether/protocol';
import { sleep, startPostgresPair, waitFor, type PostgresPair } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { stopPairSuite } from './helpers/pair-teardown.js';
import { RawAgent } from './helpers/raw-agent.js';

// The scheduler through a promotion that loses its takeover (issue 39): two
// panels placing replicas (TETHER_ALLOCATIONS=on) on an asynchronous primary
// and standby, the standby streaming through a relay the test holds back.
// The holder gives the lease up and the other panel takes it under the next
// epoch and places a replica, all on the primary only; the primary is
// SIGKILLed and the standby promoted. The promoted server still names the
// old holder under the old epoch, while the other panel holds the newer epoch
// in memory. A test-only trigger records, for every allocation written, the
// lease row as it stood: afterwards every placement is made under the lease's
// current holder and epoch, all of them under one, and the lost epoch writes
// nothing.

const LEASE_MS = 1_500;
const env = (id: string) => ({
  TETHER_PANEL_ID: id,
  TETHER_ALLOCATIONS: 'on',
  TETHER_SCHEDULER_LEASE_MS: String(LEASE_MS),
  TETHER_SCHEDULER_INTERVAL_MS: '150',
  TETHER_DB_CONNECT_TIMEOUT_MS: '1000',
  TETHER_DB_QUERY_TIMEOUT_MS: '1000',
  TETHER_READY_TIMEOUT_MS: '400',
  TETHER_PANEL_LEASE_MS: '6000',
});

const AUDIT = `
CREATE TABLE test_placements (
  seq bigserial PRIMARY KEY, op text NOT NULL, allocation_id text NOT NULL, epoch bigint NOT NULL,
  lease_holder text, lease_epoch bigint);
CREATE FUNCTION test_placement() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO test_placements (op, allocation_id, epoch, lease_holder, lease_epoch)
    SELECT TG_OP, NEW.id, NEW.epoch, l.holder, l.epoch FROM (SELECT 1) one LEFT JOIN scheduler_lease l ON l.id = 1;
  RETURN NULL; END $$;
CREATE TRIGGER test_placement AFTER INSERT ON allocations FOR EACH ROW EXECUTE FUNCTION test_placement();
`;

interface Placement {
  seq: string;
  allocation_id: string;
  epoch: string;
  lease_holder: string;
  lease_epoch: string;
}

let pair: PostgresPair;
const panels: Panel[] = [];
const agents: RawAgent[] = [];

beforeAll(async () => {
  pair = await startPostgresPair({ replicationRelay: true });
  await pair.createDatabase('tether');
  for (const id of ['sched-a', 'sched-b']) panels.push(await startPanel({ databaseUrl: pair.bothUrl('tether'), env: env(id) }));
  for (const statement of AUDIT.split(/;\n(?=CREATE)/)) await pair.primary.query(statement, 'tether');
  for (let i = 0; i < 3; i++) {
    const node = await panels[i % 2]!.createNode(`sched-node-${i}`);
    agents.push(
      await RawAgent.connect({ url: panels[i % 2]!.url, token: node.token, node: node.name, capabilities: [CAPABILITIES.WORKLOAD_ALLOCATIONS], heartbeatMs: 300 }),
    );
  }
}, 90_000);

afterAll(() => stopPairSuite(agents, panels, pair), 60_000);

const held = (p: Panel) => p.app.scheduler.lease.held;
const onStandby = <R extends object>(sql: string) => pair.standby.query<R & Record<string, unknown>>(sql, 'tether');
const runCount = async (server: 'primary' | 'standby', serviceId: string) =>
  Number((await pair[server].query<{ n: string }>(`SELECT count(*) AS n FROM allocations WHERE service_id = '${serviceId}' AND desired = 'run'`, 'tether'))[0]!.n);

describe('the scheduler through a promotion that lost its takeover', () => {
  it('afterwards every placement is made under the lease as it stands, one epoch, and the lost epoch writes nothing', async () => {
    const [a] = panels as [Panel, Panel];
    const team = await a.api('POST', '/v1/teams', { name: 'sched-failover' });
    expect(team.status).toBe(201);
    const created = await a.api('POST', '/v1/services', { teamId: team.body.id, name: 'spread', image: 'tether-test/busybox:1', internalPort: 8080, replicas: 2 });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const serviceId = created.body.id as string;
    await waitFor(async () => (await runCount('standby', serviceId)) === 2, { timeoutMs: 10_000, message: 'two replicas placed and streamed to the standby' });
    const holder = await waitFor(() => panels.find((p) => held(p) !== null), { timeoutMs: 5_000, message: 'a scheduler lease holder' });
    const other = panels.find((p) => p !== holder)!;
    const oldEpoch = held(holder)!.epoch;

    // From here the standby gets nothing: the holder gives the lease up, the other panel takes the next epoch
    // and places a third replica, on the primary only. The old holder keeps competing for the lease.
    pair.replication!.pause();
    await holder.app.scheduler.lease.stop();
    const lostEpoch = (await waitFor(() => held(other), { timeoutMs: LEASE_MS * 2, message: 'the other panel took the lease' })).epoch;
    expect(lostEpoch).toBeGreaterThan(oldEpoch);
    holder.app.scheduler.lease.start();
    const scaled = await other.api('PATCH', `/v1/services/${serviceId}`, { replicas: 3 });
    expect(scaled.status, JSON.stringify(scaled.body)).toBe(200);
    await waitFor(async () => (await runCount('primary', serviceId)) === 3, { timeoutMs: 5_000, message: 'the third replica placed on the primary' });
    const before = await onStandby<Placement>('SELECT max(seq)::text AS seq FROM test_placements');
    const lastStreamed = Number(before[0]?.seq ?? 0);

    await pair.primary.kill();
    await pair.standby.promote();
    await waitFor(() => panels.every((p) => p.app.panelStatus.database.fencedTimeline === 2), { timeoutMs: 15_000, message: 'both panels fenced on the new timeline' });
    // The scale-up's commit is lost with the primary: asked again, it is placed on the promoted server.
    expect(await runCount('standby', serviceId)).toBe(2);
    const again = await other.api('PATCH', `/v1/services/${serviceId}`, { replicas: 3 });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    await waitFor(async () => (await runCount('standby', serviceId)) === 3, { timeoutMs: 10_000, message: 'the third replica placed on the promoted server' });
    await sleep(LEASE_MS);

    const after = await onStandby<Placement>(`SELECT seq::text, allocation_id, epoch::text, lease_holder, lease_epoch::text FROM test_placements WHERE seq > ${lastStreamed} ORDER BY seq`);
    expect(after.length).toBeGreaterThan(0);
    // Each placement under the lease as it stood when written, all under one epoch, none under the lost one.
    for (const p of after) expect(p.epoch).toBe(p.lease_epoch);
    expect(new Set(after.map((p) => p.epoch)).size).toBe(1);
    expect(new Set(after.map((p) => p.lease_holder)).size).toBe(1);
    expect(after.map((p) => Number(p.epoch))).not.toContain(lostEpoch);
    // The lease row now: one holder, and the panel that held the lost epoch in memory holds none other than it.
    const lease = (await onStandby<{ holder: string; epoch: string }>('SELECT holder, epoch::text FROM scheduler_lease WHERE id = 1'))[0]!;
    expect(lease.holder).toBe(after[0]!.lease_holder);
    const holders = panels.filter((p) => held(p) !== null);
    expect(holders.map((p) => held(p)!.epoch)).toEqual([Number(lease.epoch)]);
    // Every allocation once: three replicas, one per node.
    const rows = await onStandby<{ node_id: string }>(`SELECT node_id FROM allocations WHERE service_id = '${serviceId}' AND desired = 'run'`);
    expect(new Set(rows.map((r) => r.node_id)).size).toBe(3);
    console.log(`scheduler through a promotion: held epoch ${oldEpoch}, lost takeover epoch ${lostEpoch}; afterwards ${after.length} placements under ${lease.holder} epoch ${lease.epoch}`);
  }, 90_000);
});
