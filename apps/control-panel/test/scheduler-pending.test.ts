import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import { Scheduler } from '../src/cluster/scheduler-loop.js';
import { createDeployment } from '../src/domain/deployments.js';
import { createService, getService } from '../src/domain/services.js';
import { createNode, updateNode } from '../src/domain/nodes.js';
import type { ApiDeps } from '../src/domain/api-deps.js';
import { PanelEvents } from '../src/panel-events.js';
import { ALLOCATIONS_CAPABILITY } from '../src/scheduling/managed.js';
import { serviceStatus, STATUS_SERVICE_SELECT } from '../src/status/service-status.js';
import { useMigratedDatabase } from './helpers/migrated-database.js';
import { markLive } from './helpers/live-node.js';

// Capacity honest (issue 36) on a real PostgreSQL, without agents: a service
// made while no node is eligible is created (no home, replicas pending with
// the reason), its deployment accepted and waiting; once a node is eligible
// (registered with a live session speaking allocations, or labelled) the
// running scheduler places it with no further request, and the service gets
// that node as its home. Nodes are live as the cluster writes it (owner and
// report rows under a panel whose lease is live), as in scheduler-loop.test.ts.

const db = useMigratedDatabase();
const sql = (text: string, ...values: unknown[]) => db.prisma.$executeRawUnsafe(text, ...values);
const operator = { tokenId: 'tok-op', role: 'operator' as const, teamId: null };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const INTERVAL_MS = 100;
/** Placed within a few intervals of the node becoming eligible (each evaluation is a few queries). */
const PLACED_WITHIN_MS = 3_000;

let teamId = '';
let scheduler: Scheduler;
const events = new PanelEvents();
let deps: ApiDeps;
const makeDeps = (): ApiDeps => ({
  prisma: db.prisma,
  events,
  keyring: null,
  placesLater: true,
  dispatcher: {
    dispatch: async () => {
      throw new Error('a service without a home is managed: never dispatched as a deploy frame');
    },
  },
});

/** A node whose agent speaks allocations, with a live session on panel "owner". */
async function liveNode(name: string): Promise<string> {
  const node = await createNode(db.prisma, { name });
  await db.prisma.node.update({ where: { id: node.id }, data: { capabilities: [ALLOCATIONS_CAPABILITY] } });
  await markLive(db.prisma, node.id, name);
  return node.id;
}

const runAllocations = (serviceId: string) =>
  db.prisma.allocation.findMany({ where: { serviceId, desired: 'run' }, include: { node: { select: { name: true } } }, orderBy: { createdAt: 'asc' } });

/** Polls until the service has a home; the time it took (ms), or a failure past the bound. */
async function homedWithin(serviceId: string, boundMs: number): Promise<number> {
  const start = performance.now();
  while (performance.now() - start < boundMs) {
    if ((await db.prisma.service.findUniqueOrThrow({ where: { id: serviceId } })).nodeId !== null) return performance.now() - start;
    await sleep(20);
  }
  throw new Error(`service ${serviceId} not placed within ${boundMs} ms`);
}

async function statusOf(serviceId: string) {
  const row = await db.prisma.service.findUniqueOrThrow({ where: { id: serviceId }, select: STATUS_SERVICE_SELECT });
  return serviceStatus(row, { get: () => undefined, lastTeardown: () => undefined });
}

beforeAll(async () => {
  deps = makeDeps();
  await sql(`INSERT INTO panels (id, lease_until, renewed_at) VALUES ('owner', now() + interval '1 hour', now())`);
  teamId = (await db.prisma.team.create({ data: { name: 'pending-team' } })).id;
  scheduler = new Scheduler({
    prisma: db.prisma,
    panelId: 'sched-pending',
    logger: silentLogger,
    leaseMs: 30_000,
    intervalMs: INTERVAL_MS,
    progressDeadlineMs: 60_000,
    holdsSession: () => false,
    allocationsChanged: () => undefined,
  });
  events.on('scheduler.nudge', ({ reason }) => scheduler.nudge(reason));
  scheduler.start();
});

afterAll(async () => {
  await scheduler.stop();
});

describe('capacity honest', () => {
  it('no node at all: created without a home, replicas pending NO_NODE_AVAILABLE, a deployment waits; a node joins: placed with no request', async () => {
    const made = await createService(deps, operator, { name: 'early', image: 'registry.example.com/web:1', replicas: 2, teamId });
    expect(made).toMatchObject({ nodeId: null, nodeName: null, pending: { count: 2, code: 'NO_NODE_AVAILABLE' } });
    const { httpStatus, deployment } = await createDeployment(deps, operator, made.id);
    expect(httpStatus).toBe(201);
    expect(deployment).toMatchObject({ status: 'pending', nodeId: null, reason: expect.stringContaining('no node yet') });

    // Several evaluations with nothing eligible: still pending, with the scheduler's reason; nothing allocated.
    await sleep(INTERVAL_MS * 4);
    expect(await runAllocations(made.id)).toEqual([]);
    const waiting = await statusOf(made.id);
    expect(waiting).toMatchObject({ node: null, state: 'pending', runningReplicas: 0, desiredReplicas: 2 });
    expect(waiting.allocations).toHaveLength(2);
    expect(waiting.allocations.every((a) => a.allocationId === null && a.node === null && a.state === 'pending' && a.code === 'NO_NODE_AVAILABLE')).toBe(true);
    expect(waiting.reason).toMatch(/^0\/2 running: no node yet, 2 pending: NO_NODE_AVAILABLE: /);

    const joinedAt = performance.now();
    const n1 = await liveNode('p-1');
    const tookMs = await homedWithin(made.id, PLACED_WITHIN_MS);
    expect(performance.now() - joinedAt).toBeGreaterThan(0);
    expect(tookMs).toBeLessThan(PLACED_WITHIN_MS);
    const after = await getService(deps, operator, made.id);
    expect(after).toMatchObject({ nodeId: n1, nodeName: 'p-1', pending: null });
    // Both replicas on the one eligible node, each running the waiting deployment, which now names the home.
    expect((await runAllocations(made.id)).map((a) => [a.node.name, a.releaseId])).toEqual([
      ['p-1', deployment.id],
      ['p-1', deployment.id],
    ]);
    expect((await db.prisma.deployment.findUniqueOrThrow({ where: { id: deployment.id } })).nodeId).toBe(n1);
    expect((await statusOf(made.id)).allocations.every((a) => a.allocationId !== null && a.node?.name === 'p-1')).toBe(true);
  });

  it('labels nobody carries: pending NO_NODE_MATCHES_LABELS until a node is labelled, then placed there with no request', async () => {
    const made = await createService(deps, operator, { name: 'gpu', image: 'registry.example.com/web:1', replicas: 1, teamId, placement: { labels: { gpu: 'yes' } } });
    expect(made).toMatchObject({ nodeId: null, nodeName: null, pending: { count: 1, code: 'NO_NODE_MATCHES_LABELS', message: expect.stringContaining('gpu=yes') } });
    await sleep(INTERVAL_MS * 4);
    expect(await runAllocations(made.id)).toEqual([]);
    expect((await statusOf(made.id)).allocations).toMatchObject([{ allocationId: null, state: 'pending', code: 'NO_NODE_MATCHES_LABELS', reason: expect.stringContaining('gpu=yes') }]);
    expect(await db.prisma.service.findUniqueOrThrow({ where: { id: made.id } })).toMatchObject({ pending: { code: 'NO_NODE_MATCHES_LABELS', count: 1 } });

    const n2 = await liveNode('p-2');
    // A live node without the label changes nothing.
    await sleep(INTERVAL_MS * 4);
    expect((await db.prisma.service.findUniqueOrThrow({ where: { id: made.id } })).nodeId).toBeNull();
    await updateNode(db.prisma, n2, { labels: { gpu: 'yes' } });
    await homedWithin(made.id, PLACED_WITHIN_MS);
    expect(await getService(deps, operator, made.id)).toMatchObject({ nodeId: n2, nodeName: 'p-2', pending: null });
    expect((await runAllocations(made.id)).map((a) => a.node.name)).toEqual(['p-2']);
  });

  it('a name that does not exist is still refused (400 UNKNOWN_NODE); nothing is stored', async () => {
    const before = await db.prisma.service.count();
    await expect(createService(deps, operator, { name: 'nowhere', image: 'registry.example.com/web:1', teamId, node: 'no-such-node' })).rejects.toMatchObject({ code: 'UNKNOWN_NODE' });
    expect(await db.prisma.service.count()).toBe(before);
  });
});
