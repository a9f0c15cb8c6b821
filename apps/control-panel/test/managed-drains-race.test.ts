import { describe, expect, it } from 'vitest';
import { CAPABILITIES } from '@tether/protocol';
import { sleep } from '@tether/testkit';
import { writePlan } from '../src/cluster/scheduler-writes.js';
import type { Tx } from '../src/db/database.js';
import { finishManagedDrains, recordAllocationDrain } from '../src/db/managed-drains.js';
import { prismaSql } from '../src/db/sql.js';
import { generateToken, hashToken } from '../src/domain/tokens.js';
import type { EvaluationPlan } from '../src/scheduling/evaluation-plan.js';
import { SMALL_POOL, useMigratedDatabase } from './helpers/migrated-database.js';

// A managed deployment's drain is finished by whichever of two transactions commits second: the scheduler's write
// that ends it `running`, and the write of a node's last `allocations.drained` report (db/managed-drains.ts). One
// CI run saw both within 3 ms, each check made before the other committed, and the drain was never finished. Here
// each order is made for real on PostgreSQL: the first transaction is held open after its check, the second runs
// meanwhile, and only then does the first commit.

const db = useMigratedDatabase({ limits: { ...SMALL_POOL, poolSize: 4 } });

async function deliveredRelease(name: string) {
  const team = await db.prisma.team.create({ data: { name } });
  const node = await db.prisma.node.create({
    data: { name, tokenHash: hashToken(generateToken('node')), capabilities: [CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.WORKLOAD_DRAIN, CAPABILITIES.ALLOCATIONS_DRAIN] },
  });
  const service = await db.prisma.service.create({ data: { teamId: team.id, name, image: 'app:1', nodeId: node.id } });
  const deployment = await db.prisma.deployment.create({ data: { serviceId: service.id, nodeId: node.id, spec: {}, status: 'delivered' } });
  const allocation = await db.prisma.allocation.create({ data: { serviceId: service.id, nodeId: node.id, releaseId: deployment.id, cause: 'scale-up', epoch: 1 } });
  const report = {
    deploymentId: deployment.id,
    nodeId: node.id,
    sessionId: 'ses-1',
    allocationIds: [allocation.id],
    connectionsOpenAtSwitch: 2,
    connectionsCut: 1,
    drainEndedAt: new Date(Date.UTC(2026, 11, 5, 9, 2, 21, 692)).toISOString(),
  };
  return { serviceId: service.id, deploymentId: deployment.id, report };
}

function runningPlan(id: string, serviceId: string): EvaluationPlan {
  return {
    insert: [], stop: [], remove: [], moves: [], pending: [], refused: [], changedNodes: [], evacuations: [], moved: [], deferred: 0, progressed: [], homes: [], pendingWrites: [],
    deployments: [{ kind: 'running', id, serviceId, reason: '1/1 replicas running', imageRef: null }],
  };
}

/**
 * Runs `work` in a transaction that stays open until `commit()` is called: `done` resolves once `work` has run
 * (its check made, the check's lock held), `committed` once the transaction committed.
 */
function heldTransaction(work: (tx: Tx) => Promise<unknown>) {
  let commit!: () => void;
  let workDone!: () => void;
  const release = new Promise<void>((resolve) => (commit = resolve));
  const done = new Promise<void>((resolve) => (workDone = resolve));
  const committed = db.prisma.$transaction(
    async (tx) => {
      await work(tx);
      workDone();
      await release;
    },
    { maxWait: 2_000, timeout: 10_000 },
  );
  return { done, commit, committed };
}

const drainOf = (id: string) =>
  db.prisma.deployment.findUniqueOrThrow({ where: { id }, select: { status: true, reportsDrain: true, connectionsOpenAtSwitch: true, connectionsCut: true, drainEndedAt: true } });

describe('a managed drain finished by the second of two overlapping transactions', () => {
  it('the scheduler ends it running first (held open); the report written meanwhile finishes the drain once it commits', async () => {
    const r = await deliveredRelease('race-running-first');
    const scheduler = heldTransaction(async (tx) => writePlan(tx, runningPlan(r.deploymentId, r.serviceId), 1));
    // The scheduler's check has run (it holds the check's lock) before the report is written.
    await scheduler.done;
    let reported = false;
    const report = db.writer.apply([{ kind: 'allocation.drained', ...r.report }]).then((result) => {
      reported = true;
      return result;
    });
    await sleep(300);
    // The report's check waits for the scheduler's transaction: it would see no `running` yet.
    expect(reported).toBe(false);
    scheduler.commit();
    await scheduler.committed;
    expect(await report).toEqual([true]);
    expect(await drainOf(r.deploymentId)).toEqual({ status: 'running', reportsDrain: true, connectionsOpenAtSwitch: 2, connectionsCut: 1, drainEndedAt: new Date(r.report.drainEndedAt) });
  });

  it('the report first (held open); the scheduler ending it running meanwhile finishes the drain once it commits', async () => {
    const r = await deliveredRelease('race-report-first');
    const report = heldTransaction(async (tx) => {
      const sql = prismaSql(tx);
      expect(await recordAllocationDrain(sql, r.report)).toBe(true);
      await finishManagedDrains(sql, [r.deploymentId]);
    });
    await report.done;
    let ran = false;
    const scheduler = db.prisma
      .$transaction(async (tx) => writePlan(tx, runningPlan(r.deploymentId, r.serviceId), 1), { maxWait: 2_000, timeout: 10_000 })
      .then(() => {
        ran = true;
      });
    await sleep(300);
    expect(ran).toBe(false);
    report.commit();
    await report.committed;
    await scheduler;
    expect(await drainOf(r.deploymentId)).toEqual({ status: 'running', reportsDrain: true, connectionsOpenAtSwitch: 2, connectionsCut: 1, drainEndedAt: new Date(r.report.drainEndedAt) });
  });
});
