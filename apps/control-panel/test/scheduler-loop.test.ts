import { EventEmitter } from 'node:events';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import { Scheduler, type SchedulerSignals } from '../src/cluster/scheduler-loop.js';
import type { Signal } from '../src/cluster/panel-signals.js';
import { evacuationAnswer } from '../src/cluster/scheduler-loop.js';
import { createDeployment } from '../src/domain/deployments.js';
import { evacuateNode, setCordon } from '../src/domain/nodes.js';
import type { ApiDeps } from '../src/domain/api-deps.js';
import { PanelEvents } from '../src/panel-events.js';
import { ALLOCATIONS_CAPABILITY, managedByAllocations, managedSql } from '../src/scheduling/managed.js';
import { homeJoin } from '../src/db/where-services-run.js';
import { useMigratedDatabase } from './helpers/migrated-database.js';
import { markLive } from './helpers/live-node.js';

// The scheduler of issue 36 on a real PostgreSQL, without agents: nodes with
// the allocations capability and live sessions (the owner and report rows the
// cluster writes, under a panel whose lease is live), managed services, and
// allocation status rows written as the session side's ingestion writes them.

const db = useMigratedDatabase();
const sql = (text: string, ...values: unknown[]) => db.prisma.$executeRawUnsafe(text, ...values);
const rows = <T>(text: string, ...values: unknown[]) => db.prisma.$queryRawUnsafe<T[]>(text, ...values);
const operator = { tokenId: 'tok-op', role: 'operator' as const, teamId: null };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let teamId = '';
const nodeIds: Record<string, string> = {};
const made: Scheduler[] = [];

/** Signals the schedulers sent (kind, ids), as the other panels would hear them. */
/** Nodes whose session this panel no longer holds. */
const away = new Set<string>();
const sent: { kind: string; panel: string; ids: string[] }[] = [];

/** What the panels' LISTEN/NOTIFY does for these tests: every signal sent reaches every scheduler on the bus. */
const bus = new EventEmitter<{ signal: [Signal] }>();
const busSignals: SchedulerSignals = {
  send: async (kind, panel, ids) => {
    sent.push({ kind, panel, ids: [...ids] });
    bus.emit('signal', { kind, panel, ids: [...ids] });
  },
  on: (_event, listener) => bus.on('signal', listener),
};

function scheduler(
  panelId: string,
  changed: string[][] = [],
  progressDeadlineMs = 60_000,
  holds: (nodeId: string) => boolean = (id) => !away.has(id),
  intervalMs = 100,
): Scheduler {
  const s = new Scheduler({
    signals: busSignals,
    prisma: db.prisma,
    panelId,
    logger: silentLogger,
    // Held through a whole case: a case renews once and then evaluates for seconds under a loaded CI (a 1 s lease ran
    // out on the holder's own clock there, and evaluate() answered null). Takeovers expire it in SQL instead.
    leaseMs: 30_000,
    intervalMs,
    progressDeadlineMs,
    // This panel holds every node's session: told here (and the other panels signalled).
    holdsSession: holds,
    allocationsChanged: (ids) => void changed.push([...ids].sort()),
  });
  made.push(s);
  return s;
}

async function addNode(name: string, capabilities = [ALLOCATIONS_CAPABILITY]): Promise<string> {
  const node = await db.prisma.node.create({ data: { name, tokenHash: `hash-${name}`, capabilities } });
  nodeIds[name] = node.id;
  // A live session on panel "owner" (its lease live): the owner row and the report row of the same generation.
  await markLive(db.prisma, node.id, name);
  return node.id;
}

async function addService(name: string, replicas: number, home = 'a') {
  return db.prisma.service.create({ data: { teamId, name, image: 'registry.example.com/web:1', replicas, nodeId: nodeIds[home]!, placement: {} } });
}

interface AllocationSql {
  id: string;
  node: string;
  release_id: string | null;
  desired: string;
  epoch: string;
  cause: string;
}
const allocationsOf = (serviceId: string) =>
  rows<AllocationSql>(
    `SELECT a.id, n.name AS node, a.release_id, a.desired, a.epoch::text AS epoch, a.cause FROM allocations a JOIN nodes n ON n.id = a.node_id WHERE a.service_id = $1 ORDER BY n.name, a.created_at, a.id`,
    serviceId,
  );
const running = async (serviceId: string) => (await allocationsOf(serviceId)).filter((a) => a.desired === 'run');
/** As the session side's ingestion writes an allocations.status entry. */
const report = (id: string, status: Record<string, unknown>) =>
  sql(`UPDATE allocations SET status = $2::jsonb, status_at = now(), status_session = 'sess' WHERE id = $1`, id, JSON.stringify({ since: new Date().toISOString(), containerId: null, code: null, reason: null, ...status }));
const healthyOn = (release: string) => ({ state: 'running', runningDeploymentId: release, health: 'healthy', imageRef: `img@${release}` });

/** The service's first release deployed, placed, and reported running healthy by every replica: it runs d1. */
async function runningFirstRelease(s: Pick<Scheduler, 'evaluate'>, serviceId: string): Promise<string> {
  const d1 = (await createDeployment(deps(), operator, serviceId)).deployment.id;
  await s.evaluate();
  for (const a of await running(serviceId)) await report(a.id, healthyOn(d1));
  await s.evaluate();
  return d1;
}

function deps(events = new PanelEvents()): ApiDeps {
  return {
    prisma: db.prisma,
    events,
    keyring: null,
    dispatcher: {
      dispatch: async () => {
        throw new Error('a managed service must not be dispatched as a deploy frame');
      },
    },
  };
}

beforeAll(async () => {
  await sql(`INSERT INTO panels (id, lease_until, renewed_at) VALUES ('owner', now() + interval '1 hour', now())`);
  teamId = (await db.prisma.team.create({ data: { name: 'sched-team' } })).id;
  for (const name of ['a', 'b', 'c']) await addNode(name);
});

afterEach(async () => {
  for (const s of made.splice(0)) await s.stop();
  bus.removeAllListeners();
  away.clear();
  await sql(`UPDATE node_reports SET state = 'connected'`);
  await sql('UPDATE nodes SET cordoned = false, evacuating = false');
  await sql('DELETE FROM services');
  await sql('DELETE FROM scheduler_lease');
});

describe('managed by allocations', () => {
  it('the SQL form agrees with the pure function on every node, and a service without a home is managed', async () => {
    await addNode('legacy', []);
    for (const name of Object.keys(nodeIds)) await addService(`on-${name}`, 1, name);
    await db.prisma.service.create({ data: { teamId, name: 'homeless', image: 'registry.example.com/web:1', replicas: 1, nodeId: null, placement: {} } });
    const got = await rows<{ name: string; managed: boolean; capabilities: string[] | null }>(
      `SELECT s.name, ${managedSql('s', 'h')} AS managed, h.capabilities FROM services s ${homeJoin('s', 'h')} ORDER BY s.name`,
    );
    expect(got.map((n) => [n.name, n.managed])).toEqual(got.map((n) => [n.name, managedByAllocations(n.capabilities === null ? null : { capabilities: n.capabilities })]));
    expect(got.find((n) => n.name === 'on-legacy')?.managed).toBe(false);
    expect(got.find((n) => n.name === 'on-a')?.managed).toBe(true);
    expect(got.find((n) => n.name === 'homeless')?.managed).toBe(true);
  });
});

describe('scheduler on PostgreSQL', () => {
  it('replicas 3 → one allocation per capable node; replicas 2 → exactly one stopped, deleted once reported removed; a fourth node moves nothing', async () => {
    const changed: string[][] = [];
    const s = scheduler('sched-1', changed);
    await s.lease.renew();
    const svc = await addService('spread', 3);
    const first = await s.evaluate();
    expect(first).toMatchObject({ epoch: expect.any(Number), placed: 3, stopped: 0 });
    const placed = await running(svc.id);
    expect(placed.map((a) => a.node)).toEqual(['a', 'b', 'c']);
    // No release yet: the replicas are placed empty; the legacy node (no capability) got none.
    expect(placed.every((a) => a.release_id === null && a.cause === 'scale-up' && a.epoch === String(first!.epoch))).toBe(true);
    expect(changed).toEqual([[nodeIds.a, nodeIds.b, nodeIds.c].sort()]);
    expect(sent.filter((x) => x.panel === 'sched-1')).toEqual([{ kind: 'allocations', panel: 'sched-1', ids: [nodeIds.a, nodeIds.b, nodeIds.c].sort() }]);
    // Nothing changed: nothing written.
    expect(await s.evaluate()).toMatchObject({ placed: 0, stopped: 0, moved: 0, changedNodes: [] });

    await db.prisma.service.update({ where: { id: svc.id }, data: { replicas: 2 } });
    expect(await s.evaluate()).toMatchObject({ placed: 0, stopped: 1 });
    const after = await allocationsOf(svc.id);
    expect(after.filter((a) => a.desired === 'stop')).toHaveLength(1);
    expect(after.filter((a) => a.desired === 'run')).toHaveLength(2);
    const stopped = after.find((a) => a.desired === 'stop')!;
    // Until its node reports it removed, the stopped row stays; then it goes.
    expect(await s.evaluate()).toMatchObject({ removed: 0 });
    await report(stopped.id, { state: 'removed', runningDeploymentId: null, health: 'none' });
    expect(await s.evaluate()).toMatchObject({ removed: 1, changedNodes: [] });
    expect(await allocationsOf(svc.id)).toHaveLength(2);

    const before = await running(svc.id);
    await addNode('d');
    expect(await s.evaluate()).toMatchObject({ placed: 0, stopped: 0, moved: 0 });
    expect(await running(svc.id)).toEqual(before);
    await db.prisma.service.delete({ where: { id: svc.id } });
  });

  it('a deployment of a managed service sends no deploy frame; it rolls out one node at a time as statuses report it running and healthy, then runs', async () => {
    const s = scheduler('sched-2');
    await s.lease.renew();
    const svc = await addService('roll', 3);
    const events = new PanelEvents();
    const nudges: string[] = [];
    events.on('scheduler.nudge', ({ reason }) => nudges.push(reason));
    const d1 = await createDeployment(deps(events), operator, svc.id);
    expect(d1).toMatchObject({ httpStatus: 201, deployment: { status: 'pending', nodeId: nodeIds.a } });
    expect(d1.deployment.dispatchedAt).not.toBeNull();
    expect(nudges).toEqual([`deployment ${d1.deployment.id} created`]);

    // Placed on d1 at once (nothing ran before), then running once all three report it healthy.
    await s.evaluate();
    const placed = await running(svc.id);
    expect(placed.map((a) => [a.node, a.release_id])).toEqual([
      ['a', d1.deployment.id],
      ['b', d1.deployment.id],
      ['c', d1.deployment.id],
    ]);
    for (const a of placed) await report(a.id, healthyOn(d1.deployment.id));
    await s.evaluate();
    expect(await db.prisma.deployment.findUnique({ where: { id: d1.deployment.id } })).toMatchObject({ status: 'running', imageRef: `img@${d1.deployment.id}` });

    // A second release: one step per evaluation only once the step before runs it healthy.
    const d2 = (await createDeployment(deps(), operator, svc.id)).deployment.id;
    const releases = async () => (await running(svc.id)).map((a) => (a.release_id === d2 ? 'new' : 'old'));
    const steps: string[][] = [];
    const ids = new Map((await running(svc.id)).map((a) => [a.node, a.id]));
    for (const node of ['a', 'b', 'c']) {
      const result = await s.evaluate();
      expect(result?.moved).toBe(1);
      steps.push(await releases());
      // Not yet reported: the next evaluation moves nothing.
      expect(await s.evaluate()).toMatchObject({ moved: 0 });
      // Running but its health check pending: still nothing.
      await report(ids.get(node)!, { ...healthyOn(d2), health: 'starting' });
      expect(await s.evaluate()).toMatchObject({ moved: 0 });
      expect((await db.prisma.deployment.findUnique({ where: { id: d2 } }))?.status).toBe('pending');
      await report(ids.get(node)!, healthyOn(d2));
    }
    expect(steps).toEqual([
      ['new', 'old', 'old'],
      ['new', 'new', 'old'],
      ['new', 'new', 'new'],
    ]);
    const done = await s.evaluate();
    expect(done?.deployments).toContainEqual(expect.objectContaining({ kind: 'running', id: d2 }));
    const row = await db.prisma.deployment.findUnique({ where: { id: d2 } });
    expect(row).toMatchObject({ status: 'running', reason: 'running: 3 of 3 replicas run it healthy on a, b, c' });
    expect(row?.runningAt).not.toBeNull();
    expect(row?.finishedAt).not.toBeNull();
    expect(await db.prisma.deployment.findUnique({ where: { id: d1.deployment.id } })).toMatchObject({ status: 'superseded', reason: `replaced by deployment ${d2}` });
    await db.prisma.service.delete({ where: { id: svc.id } });
  });

  it('a failed status on the second node fails the deployment naming it, and every replica goes back to the previous release', async () => {
    const s = scheduler('sched-3');
    await s.lease.renew();
    const svc = await addService('fail', 3);
    const d1 = await runningFirstRelease(s, svc.id);
    const d2 = (await createDeployment(deps(), operator, svc.id)).deployment.id;
    const byNode = new Map((await running(svc.id)).map((a) => [a.node, a.id]));
    await s.evaluate();
    await report(byNode.get('a')!, healthyOn(d2));
    await s.evaluate();
    expect((await running(svc.id)).map((a) => a.release_id === d2)).toEqual([true, true, false]);
    await report(byNode.get('b')!, { state: 'failed', runningDeploymentId: d1, health: 'healthy', code: 'HEALTH_CHECK_FAILED', reason: 'GET /healthz answered 500' });
    await s.evaluate();
    const row = await db.prisma.deployment.findUnique({ where: { id: d2 } });
    expect(row?.status).toBe('failed');
    expect(row?.reason).toBe(`HEALTH_CHECK_FAILED: GET /healthz answered 500 (on node b); every replica moved to it goes back to release ${d1}`);
    expect(row?.finishedAt).not.toBeNull();
    expect((await running(svc.id)).map((a) => a.release_id)).toEqual([d1, d1, d1]);
    // The previous release still runs; nothing more moves.
    expect(await db.prisma.deployment.findUnique({ where: { id: d1 } })).toMatchObject({ status: 'running' });
    expect(await s.evaluate()).toMatchObject({ moved: 0, placed: 0, stopped: 0 });
    await db.prisma.service.delete({ where: { id: svc.id } });
  });

  it('a node that stays unreachable past the progress deadline fails the rollout naming it', async () => {
    const s = scheduler('sched-4', [], 300);
    await s.lease.renew();
    const svc = await addService('late', 1, 'c');
    const d1 = (await createDeployment(deps(), operator, svc.id)).deployment.id;
    await s.evaluate();
    const [only] = await running(svc.id);
    // Its node's session ends (the report row says closed).
    await sql(`UPDATE node_reports SET state = 'closed' WHERE node_id = $1`, nodeIds[only!.node]);
    away.add(nodeIds[only!.node]!);
    await s.evaluate();
    expect((await db.prisma.deployment.findUnique({ where: { id: d1 } }))?.status).toBe('pending');
    await sleep(400);
    await s.evaluate();
    const row = await db.prisma.deployment.findUnique({ where: { id: d1 } });
    expect(row?.status).toBe('failed');
    expect(row?.reason).toMatch(new RegExp(`^PROGRESS_DEADLINE_EXCEEDED: no progress for 300 ms: node ${only!.node} unreachable;`));
    await sql(`UPDATE node_reports SET state = 'connected' WHERE node_id = $1`, nodeIds[only!.node]);
    await db.prisma.service.delete({ where: { id: svc.id } });
  });

  it("a service's rollout.progressDeadlineSeconds replaces the panel's deadline: 1 s fails it while the panel's 60 s would wait", async () => {
    const s = scheduler('sched-4b', [], 60_000);
    await s.lease.renew();
    const svc = await db.prisma.service.update({ where: { id: (await addService('late-own', 1, 'c')).id }, data: { rolloutProgressDeadlineSeconds: 1 } });
    // Before the deployment: the deadline counts from its dispatch (or its last step), never before this.
    const started = performance.now();
    const d1 = (await createDeployment(deps(), operator, svc.id)).deployment.id;
    await s.evaluate();
    const [only] = await running(svc.id);
    await sql(`UPDATE node_reports SET state = 'closed' WHERE node_id = $1`, nodeIds[only!.node]);
    away.add(nodeIds[only!.node]!);
    await sleep(500);
    await s.evaluate();
    expect((await db.prisma.deployment.findUnique({ where: { id: d1 } }))?.status).toBe('pending');
    // Evaluated every 100 ms until it fails (the panel's own deadline is a minute away).
    while ((await db.prisma.deployment.findUnique({ where: { id: d1 } }))?.status !== 'failed' && performance.now() - started < 5_000) {
      await sleep(100);
      await s.evaluate();
    }
    const took = performance.now() - started;
    const row = await db.prisma.deployment.findUnique({ where: { id: d1 } });
    expect(row?.reason).toMatch(new RegExp(`^PROGRESS_DEADLINE_EXCEEDED: no progress for 1 s: node ${only!.node} unreachable;`));
    expect(took).toBeGreaterThanOrEqual(1_000);
    expect(took).toBeLessThan(3_000);
    await sql(`UPDATE node_reports SET state = 'connected' WHERE node_id = $1`, nodeIds[only!.node]);
    await db.prisma.service.delete({ where: { id: svc.id } });
  });

  it('a service that became managed adopts the replicas its home node runs, on their release, before anything spreads', async () => {
    const s = scheduler('sched-5');
    await s.lease.renew();
    const svc = await addService('adopt', 2, 'b');
    const old = await db.prisma.deployment.create({ data: { serviceId: svc.id, nodeId: nodeIds.b!, spec: {}, status: 'running', runningAt: new Date() } });
    expect(await s.evaluate()).toMatchObject({ placed: 2, moved: 0 });
    expect((await running(svc.id)).map((a) => [a.node, a.release_id, a.cause])).toEqual([
      ['b', old.id, 'adopted'],
      ['b', old.id, 'adopted'],
    ]);
    // Scaling up spreads the new one.
    await db.prisma.service.update({ where: { id: svc.id }, data: { replicas: 3 } });
    await s.evaluate();
    expect((await running(svc.id)).map((a) => a.node)).toEqual(['a', 'b', 'b']);
    await db.prisma.service.delete({ where: { id: svc.id } });
  });

  it('the loop evaluates by itself on the holder and when nudged; an unmanaged service is left alone', async () => {
    const changed: string[][] = [];
    const s = scheduler('sched-6', changed);
    await addNode('old-agent', []);
    const legacy = await addService('legacy', 2, 'old-agent');
    s.start();
    const svc = await addService('looped', 2);
    for (let i = 0; i < 50 && (await running(svc.id)).length < 2; i++) await sleep(50);
    expect(await running(svc.id)).toHaveLength(2);
    expect(await allocationsOf(legacy.id)).toEqual([]);
    await db.prisma.service.update({ where: { id: svc.id }, data: { replicas: 1 } });
    s.nudge('test');
    for (let i = 0; i < 50 && (await running(svc.id)).length > 1; i++) await sleep(20);
    expect(await running(svc.id)).toHaveLength(1);
    expect(changed.length).toBeGreaterThanOrEqual(2);
    // A deleted service takes its allocations with it (cascade): the node that ran it is told all the same.
    const [last] = await running(svc.id);
    changed.length = 0;
    await db.prisma.service.delete({ where: { id: svc.id } });
    s.nudge('deleted');
    for (let i = 0; i < 50 && changed.length === 0; i++) await sleep(20);
    expect(changed).toEqual([[nodeIds[last!.node]]]);
    await db.prisma.service.delete({ where: { id: legacy.id } });
  });

  it('two schedulers: the one whose epoch is stale writes nothing; every allocation exists once', async () => {
    const a = scheduler('sched-a');
    const b = scheduler('sched-b');
    await a.lease.renew();
    expect(a.lease.held).not.toBeNull();
    const svc = await addService('fenced', 3);
    // A is frozen past its lease by the database's clock (it still believes it holds on its own); B takes over.
    // A millisecond back: lease_until keeps milliseconds and rounds, so now() could be stored half a millisecond ahead
    // of B's renewal in the same millisecond (this case failed 1 run in 5 that way).
    await sql(`UPDATE scheduler_lease SET lease_until = now() - interval '1 millisecond'`);
    await b.lease.renew();
    expect(b.lease.held?.epoch).toBe(a.lease.held!.epoch + 1);
    expect(await a.evaluate()).toBeNull();
    expect(await allocationsOf(svc.id)).toEqual([]);
    expect(await b.evaluate()).toMatchObject({ placed: 3 });
    expect(await a.evaluate()).toBeNull();
    await Promise.all([a.evaluate(), b.evaluate(), b.evaluate()]);
    const all = await allocationsOf(svc.id);
    expect(all.map((x) => x.node)).toEqual(['a', 'b', 'c']);
    expect(new Set(all.map((x) => x.epoch))).toEqual(new Set([String(b.lease.held!.epoch)]));
    await db.prisma.service.delete({ where: { id: svc.id } });
  });

  it('across panels: a nudge on a panel without the lease reaches the holder; the panel holding a node\'s session is told its allocations changed', async () => {
    const onA: string[][] = [];
    const onB: string[][] = [];
    // A holds the scheduler lease and node a's session; B holds the sessions of b and c.
    // Their loops run with a long interval: only a nudge makes A evaluate within this test.
    const a = scheduler('panel-a', onA, 60_000, (id) => id === nodeIds.a, 60_000);
    const b = scheduler('panel-b', onB, 60_000, (id) => id === nodeIds.b || id === nodeIds.c, 60_000);
    await a.lease.renew();
    await b.lease.renew();
    a.start();
    b.start();
    expect([a.lease.held !== null, b.lease.held !== null]).toEqual([true, false]);
    const svc = await addService('across', 3);
    const before = a.evaluations;
    // B's API took the change: its nudge is signalled (schedule) and A evaluates at once, without its loop running.
    b.nudge('service across created');
    for (let i = 0; i < 50 && (await running(svc.id)).length < 3; i++) await sleep(20);
    expect(a.evaluations).toBeGreaterThan(before);
    expect(sent).toContainEqual({ kind: 'schedule', panel: 'panel-b', ids: ['service across created'] });
    expect((await running(svc.id)).map((x) => x.node)).toEqual(['a', 'b', 'c']);
    for (let i = 0; i < 50 && onB.length === 0; i++) await sleep(20);
    expect(onA).toEqual([[nodeIds.a]]);
    expect(onB).toEqual([[nodeIds.b, nodeIds.c].sort()]);
  });
});

describe('evacuation on PostgreSQL', () => {
  it('evacuate: the answer lists what moves and what refuses; one move at a time, the old replica stopped only once the new one runs healthy; uncordon moves nothing back', async () => {
    const s = scheduler('sched-evac');
    await s.lease.renew();
    const svc = await addService('evac', 2);
    const stateful = await db.prisma.service.create({
      data: { teamId, name: 'evac-db', image: 'registry.example.com/db:1', replicas: 1, nodeId: nodeIds.a!, placement: {}, volumes: [{ name: 'data', mountPath: '/data', readOnly: false }] },
    });
    const pinned = await db.prisma.service.create({ data: { teamId, name: 'evac-pinned', image: 'registry.example.com/web:1', replicas: 1, nodeId: nodeIds.a!, placement: { nodes: ['a'] } } });
    const d1 = await runningFirstRelease(s, svc.id);
    expect((await running(svc.id)).map((a) => a.node)).toEqual(['a', 'b']);
    expect((await running(stateful.id)).map((a) => a.node)).toEqual(['a']);
    expect((await running(pinned.id)).map((a) => a.node)).toEqual(['a']);
    const onA = (await running(svc.id)).find((a) => a.node === 'a')!;

    const { node } = await evacuateNode(db.prisma, nodeIds.a!, undefined);
    expect(node).toMatchObject({ cordoned: true, evacuating: true });
    const answer = await evacuationAnswer(db.prisma, nodeIds.a!, () => true);
    expect(answer.moves).toEqual([{ serviceId: svc.id, serviceName: 'evac', allocationId: onA.id, from: 'a', to: 'c' }]);
    expect(answer.refused.map((r) => [r.serviceName, r.code]).sort()).toEqual([
      ['evac-db', 'STATEFUL_SERVICE_PINNED'],
      ['evac-pinned', 'SERVICE_PINNED_TO_NODE'],
    ]);
    expect(answer.pending).toEqual([]);

    // The replacement is placed on c, on the release a runs; a keeps running.
    expect(await s.evaluate()).toMatchObject({ placed: 1, stopped: 0 });
    const moving = await running(svc.id);
    expect(moving.map((a) => [a.node, a.release_id, a.cause])).toEqual([
      ['a', d1, onA.cause],
      ['b', d1, expect.any(String)],
      ['c', d1, 'evacuate'],
    ]);
    const onC = moving.find((a) => a.node === 'c')!;
    // Not reported, then starting: nothing stops, nothing more is placed.
    expect(await s.evaluate()).toMatchObject({ placed: 0, stopped: 0 });
    await report(onC.id, { ...healthyOn(d1), health: 'starting' });
    expect(await s.evaluate()).toMatchObject({ placed: 0, stopped: 0 });
    // Healthy: the old one on a is marked to stop (its agent drains it); nothing else moves.
    await report(onC.id, healthyOn(d1));
    expect(await s.evaluate()).toMatchObject({ placed: 0, stopped: 1 });
    expect((await allocationsOf(svc.id)).filter((a) => a.desired === 'stop').map((a) => a.id)).toEqual([onA.id]);
    expect((await running(svc.id)).map((a) => a.node)).toEqual(['b', 'c']);
    expect(await s.evaluate()).toMatchObject({ placed: 0, stopped: 0 });
    // The stateful and the pinned service stayed.
    expect((await running(stateful.id)).map((a) => a.node)).toEqual(['a']);
    expect((await running(pinned.id)).map((a) => a.node)).toEqual(['a']);
    // The deployment still runs (the move kept its release).
    expect((await db.prisma.deployment.findUnique({ where: { id: d1 } }))?.status).toBe('running');

    // Uncordon ends the evacuation and moves nothing back.
    expect(await setCordon(db.prisma, nodeIds.a!, false)).toMatchObject({ cordoned: false, evacuating: false });
    const before = await allocationsOf(svc.id);
    expect(await s.evaluate()).toMatchObject({ placed: 0, stopped: 0, moved: 0 });
    expect(await allocationsOf(svc.id)).toEqual(before);
  });

  it('a scale-down while a move is under way: it ends with the wanted count, none left on the evacuated node, never fewer healthy than wanted', async () => {
    const s = scheduler('sched-evac-2');
    await s.lease.renew();
    const svc = await addService('evac-scale', 3);
    const d1 = await runningFirstRelease(s, svc.id);
    await evacuateNode(db.prisma, nodeIds.a!, undefined);
    expect(await s.evaluate()).toMatchObject({ placed: 1, stopped: 0 });
    await db.prisma.service.update({ where: { id: svc.id }, data: { replicas: 2 } });
    for (let i = 0; i < 3; i++) {
      await s.evaluate();
      const now = await running(svc.id);
      // Whatever the order, the replicas reported healthy and still running never drop below the 2 wanted.
      expect(now.length).toBeGreaterThanOrEqual(2);
      for (const a of now) await report(a.id, healthyOn(d1));
    }
    const left = await running(svc.id);
    expect(left).toHaveLength(2);
    expect(left.some((a) => a.node === 'a')).toBe(false);
  });
});

describe('failover on PostgreSQL (issue 38)', () => {
  const GRACE = 600;
  function failoverScheduler(panelId: string, settings: { maxUnreachableFraction?: number; perMinute?: number } = {}) {
    const s = new Scheduler({
      signals: busSignals,
      prisma: db.prisma,
      panelId,
      logger: silentLogger,
      leaseMs: 1_000,
      intervalMs: 60_000,
      progressDeadlineMs: 60_000,
      holdsSession: (id) => !away.has(id),
      allocationsChanged: () => undefined,
      failover: { rescheduleAfterMs: GRACE, maxUnreachableFraction: settings.maxUnreachableFraction ?? 0.5, perMinute: settings.perMinute ?? 60 },
    });
    made.push(s);
    return s;
  }
  /** The node's session ends now: its report row closed, its teardown recorded (as the session store writes it). */
  async function down(name: string) {
    away.add(nodeIds[name]!);
    await sql(`UPDATE node_reports SET state = 'closed' WHERE node_id = $1`, nodeIds[name]);
    await sql(`UPDATE nodes SET last_teardown_at = now() AT TIME ZONE 'UTC' WHERE id = $1`, nodeIds[name]);
    return performance.now();
  }
  async function up(name: string) {
    away.delete(nodeIds[name]!);
    await sql(`UPDATE node_reports SET state = 'connected' WHERE node_id = $1`, nodeIds[name]);
  }
  /** The loop is not started here: the lease is renewed before each evaluation, as the loop does. */
  async function ev(s: Scheduler) {
    await s.lease.renew();
    return s.evaluate();
  }
  async function ready(serviceId: string, release: string) {
    for (const a of await running(serviceId)) await report(a.id, healthyOn(release));
  }

  it('a node without a session for the grace is lost: its stateless replica is re-placed (not before the grace), the lost one stopped without drain; a stateful one stays; the panel-start brake holds first', async () => {
    const s = failoverScheduler('fo-1');
    await s.lease.renew();
    const svc = await addService('fo-web', 2);
    const d1 = (await createDeployment(deps(), operator, svc.id)).deployment.id;
    await ev(s);
    await ready(svc.id, d1);
    await ev(s);
    const [first] = await running(svc.id);
    const lostNode = first!.node;
    const stateful = await db.prisma.service.create({
      data: { teamId, name: 'fo-db', image: 'registry.example.com/db:1', replicas: 1, nodeId: nodeIds[lostNode]!, placement: {}, volumes: [{ name: 'data', mountPath: '/data', readOnly: false }] },
    });
    await ev(s);
    expect((await running(stateful.id)).map((a) => a.node)).toEqual([lostNode]);

    const cut = await down(lostNode);
    // Within the grace (and within one grace of this scheduler's start: the brake says so): nothing moves.
    const early = await ev(s);
    expect(early).toMatchObject({ placed: 0, stopped: 0 });
    expect(early?.failover).toMatchObject({ brake: { reason: 'PANEL_STARTED' }, unreachable: [lostNode], lost: [] });
    await sleep(GRACE / 2);
    expect(await ev(s)).toMatchObject({ placed: 0, stopped: 0 });
    expect(performance.now() - cut).toBeLessThan(GRACE);
    await sleep(GRACE / 2 + 150);
    const moved = await ev(s);
    const after = performance.now() - cut;
    expect(moved).toMatchObject({ placed: 1, stopped: 1, failover: { brake: null, lost: [lostNode] } });
    expect(after).toBeGreaterThanOrEqual(GRACE);
    const placed = await allocationsOf(svc.id);
    expect(placed.filter((a) => a.desired === 'stop').map((a) => [a.id, a.node])).toEqual([[first!.id, lostNode]]);
    const runs = placed.filter((a) => a.desired === 'run');
    expect(runs).toHaveLength(2);
    expect(runs.every((a) => a.node !== lostNode)).toBe(true);
    expect(runs.find((a) => a.cause === 'node-lost')?.release_id).toBe(d1);
    // Audited in the same transaction, the scheduler as the actor.
    expect(
      await rows(`SELECT action, actor_name, actor_kind, team_id, target_type, target_id, outcome, code FROM audit_events WHERE action = 'service.failover' AND target_id = $1`, svc.id),
    ).toEqual([{ action: 'service.failover', actor_name: 'scheduler', actor_kind: 'scheduler', team_id: teamId, target_type: 'service', target_id: svc.id, outcome: 'success', code: 'NODE_LOST' }]);
    // The replacement says what it replaced, and the facts the scheduler acted on (kept after the stopped row goes).
    const [record] = await rows<{ replaces: string; moved_from: unknown; teardown: Date }>(
      `SELECT a.replaces, a.moved_from, n.last_teardown_at AS teardown FROM allocations a JOIN nodes n ON n.id = $2 WHERE a.service_id = $1 AND a.cause = 'node-lost'`,
      svc.id,
      nodeIds[lostNode],
    );
    expect(record).toMatchObject({
      replaces: first!.id,
      moved_from: { allocationId: first!.id, nodeId: nodeIds[lostNode], nodeName: lostNode, unreachableSince: record!.teardown.toISOString(), teardownReason: null },
    });
    // The stateful service stays on the lost node.
    expect((await running(stateful.id)).map((a) => a.node)).toEqual([lostNode]);
    // Nothing more moves; the node back later keeps nothing of it (its stop allocation stays stop: the replacement wins).
    expect(await ev(s)).toMatchObject({ placed: 0, stopped: 0 });
    await up(lostNode);
    expect(await ev(s)).toMatchObject({ placed: 0, stopped: 0 });
    expect((await running(svc.id)).every((a) => a.node !== lostNode)).toBe(true);
    expect(s.failover).toMatchObject({ brake: null, lost: [], replaced: 1 });
  });

  it('a node back within the grace keeps its allocations; too many unreachable at once holds everything with the reason', async () => {
    const s = failoverScheduler('fo-2');
    await s.lease.renew();
    const svc = await addService('fo-back', 2);
    const d1 = (await createDeployment(deps(), operator, svc.id)).deployment.id;
    await ev(s);
    await ready(svc.id, d1);
    await ev(s);
    const before = await allocationsOf(svc.id);
    const node = before[0]!.node;
    await sleep(GRACE); // past the panel-start brake
    await down(node);
    await sleep(GRACE / 3);
    expect(await ev(s)).toMatchObject({ placed: 0, stopped: 0, failover: { brake: null, unreachable: [node] } });
    await up(node);
    await sleep(GRACE);
    expect(await ev(s)).toMatchObject({ placed: 0, stopped: 0 });
    expect(await allocationsOf(svc.id)).toEqual(before);

    // More than half the fleet cut at once (the allowed share here is 50 %): past the grace nothing is re-placed,
    // the brake names why.
    const all = await rows<{ name: string }>(`SELECT name FROM nodes WHERE NOT decommissioned ORDER BY name`);
    const cut = all.slice(0, Math.floor(all.length / 2) + 1).map((n) => n.name);
    for (const name of cut) await down(name);
    await sleep(GRACE + 100);
    const held = await ev(s);
    expect(held).toMatchObject({ placed: 0, stopped: 0, failover: { brake: { reason: 'TOO_MANY_UNREACHABLE', unreachable: cut.length, nodes: all.length }, lost: [] } });
    expect(await allocationsOf(svc.id)).toEqual(before);
    // One comes back: the share drops below, and the others, away past their grace, wait one more (the partition heals).
    await up(cut[0]!);
    expect(await ev(s)).toMatchObject({ placed: 0, stopped: 0, failover: { brake: { reason: 'MANY_UNREACHABLE_RECENTLY' }, lost: [] } });
    expect(await allocationsOf(svc.id)).toEqual(before);
  });

  it('the pace: at most TETHER_RESCHEDULE_PER_MINUTE re-placements, oldest services first, the rest deferred', async () => {
    const s = failoverScheduler('fo-3', { perMinute: 1 });
    await s.lease.renew();
    const older = await db.prisma.service.create({ data: { teamId, name: 'fo-old', image: 'registry.example.com/web:1', replicas: 1, nodeId: nodeIds.a!, placement: { nodes: ['a'] }, createdAt: new Date(Date.now() - 60_000) } });
    const newer = await db.prisma.service.create({ data: { teamId, name: 'fo-new', image: 'registry.example.com/web:1', replicas: 1, nodeId: nodeIds.a!, placement: { nodes: ['a'] } } });
    await ev(s);
    // Both may run on b as well from now on: nothing moves while a is live.
    await sql(`UPDATE services SET placement = '{"nodes": ["a", "b"]}' WHERE id = ANY($1::text[])`, [older.id, newer.id]);
    expect(await ev(s)).toMatchObject({ placed: 0, stopped: 0 });
    expect((await running(older.id)).map((a) => a.node)).toEqual(['a']);
    expect((await running(newer.id)).map((a) => a.node)).toEqual(['a']);
    await sleep(GRACE);
    await down('a');
    await sleep(GRACE + 100);
    expect(await ev(s)).toMatchObject({ placed: 1, stopped: 1, failover: { deferred: 1, lost: ['a'] } });
    expect((await running(older.id)).map((a) => a.node)).toEqual(['b']);
    expect((await running(newer.id)).map((a) => a.node)).toEqual(['a']);
    // The budget of the minute is spent: the next evaluation defers it again.
    expect(await ev(s)).toMatchObject({ placed: 0, failover: { deferred: 1 } });
  });
});
