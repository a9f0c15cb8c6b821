import { describe, expect, it } from 'vitest';
import { SMALL_POOL, useMigratedDatabase } from './helpers/migrated-database.js';
import { generateToken, hashToken } from '../src/domain/tokens.js';
import type { DurableFact } from '../src/session-writes/facts.js';

// A deploy's steps (sent on a session, ACKed) are written as one plain
// statement when alone in a batch, and inside the batch's transaction
// otherwise. Against a real PostgreSQL whose database default time zone is
// not UTC (the pool's sessions run in UTC, and the statements name UTC
// themselves): the times land as Prisma reads them, delivered moves only
// from pending, running supersedes the service's previous running
// deployment, and both forms write the same row.

const db = useMigratedDatabase({ zone: 'Asia/Kolkata', limits: SMALL_POOL });

async function service(name: string): Promise<{ serviceId: string; nodeId: string }> {
  const team = await db.prisma.team.create({ data: { name } });
  const node = await db.prisma.node.create({ data: { name, tokenHash: hashToken(generateToken('node')) } });
  const service = await db.prisma.service.create({ data: { teamId: team.id, name, image: 'app:1', nodeId: node.id } });
  return { serviceId: service.id, nodeId: node.id };
}

async function pendingDeployment(name: string): Promise<string> {
  const s = await service(name);
  return (await db.prisma.deployment.create({ data: { ...s, spec: {}, status: 'pending' } })).id;
}

const sentAt = new Date(Date.UTC(2026, 11, 1, 6, 0, 1, 234));
const ackedAt = new Date(Date.UTC(2026, 11, 1, 6, 0, 2, 345));
const steps = (deploymentId: string): DurableFact[] => [
  { kind: 'deployment.dispatched', deploymentId, sessionId: 'session-1', at: sentAt.toISOString() },
  { kind: 'deployment.delivered', deploymentId, at: ackedAt.toISOString() },
];

describe('deployment steps in the fact writer', () => {
  it('alone, one statement each: session, times (in UTC whatever the database time zone), delivered from pending only', async () => {
    const id = await pendingDeployment('alone');
    for (const fact of steps(id)) expect(await db.writer.apply([fact])).toEqual([undefined]);
    expect(await db.prisma.deployment.findUniqueOrThrow({ where: { id } })).toMatchObject({
      status: 'delivered',
      sessionId: 'session-1',
      reason: 'acknowledged by the agent',
      dispatchedAt: sentAt,
      ackedAt,
    });

    // A late ACK of a deployment that already ended changes nothing.
    await db.prisma.deployment.update({ where: { id }, data: { status: 'failed', reason: 'ack timeout' } });
    await db.writer.apply([{ kind: 'deployment.delivered', deploymentId: id, at: new Date().toISOString() }]);
    expect(await db.prisma.deployment.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: 'failed', reason: 'ack timeout', ackedAt });
  });

  it('in a batch (one transaction), the same row', async () => {
    const id = await pendingDeployment('batched');
    expect(await db.writer.apply(steps(id))).toEqual([undefined, undefined]);
    expect(await db.prisma.deployment.findUniqueOrThrow({ where: { id } })).toMatchObject({
      status: 'delivered',
      sessionId: 'session-1',
      dispatchedAt: sentAt,
      ackedAt,
    });
  });

  it('finished: says whether the row changed; running supersedes the running one before it; a failure may follow running; only the named node', async () => {
    const s = await service('finished');
    const older = (await db.prisma.deployment.create({ data: { ...s, spec: {}, status: 'running' } })).id;
    const id = (await db.prisma.deployment.create({ data: { ...s, spec: {}, status: 'delivered' } })).id;
    const finished = (status: 'running' | 'failed', nodeId: string | null): DurableFact => ({ kind: 'deployment.finished', deploymentId: id, status, reason: status, at: ackedAt.toISOString(), nodeId });

    expect(await db.writer.apply([finished('running', 'another-node')])).toEqual([false]);
    expect(await db.writer.apply([finished('running', s.nodeId)])).toEqual([true]);
    expect(await db.prisma.deployment.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: 'running', reason: 'running', finishedAt: ackedAt });
    expect(await db.prisma.deployment.findUniqueOrThrow({ where: { id: older } })).toMatchObject({ status: 'superseded', reason: `replaced by deployment ${id}` });
    // Running again (a retried write) changes nothing and supersedes nothing more.
    expect(await db.writer.apply([finished('running', s.nodeId)])).toEqual([false]);
    expect(await db.writer.apply([finished('failed', null)])).toEqual([true]);
    expect(await db.prisma.deployment.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: 'failed' });
    expect(await db.writer.apply([finished('failed', null)])).toEqual([false]);
  });
});
