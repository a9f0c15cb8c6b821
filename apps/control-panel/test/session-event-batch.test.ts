import { describe, expect, it } from 'vitest';
import { SMALL_POOL, useMigratedDatabase } from './helpers/migrated-database.js';
import { generateToken, hashToken } from '../src/domain/tokens.js';
import type { DurableFact } from '../src/session-writes/facts.js';
import { sessionWaves, type SessionFact } from '../src/session-writes/session-event-batch.js';

// Session opens and closes are written many to a statement (a reconnect storm
// is thousands a second). Against a real PostgreSQL: a node's facts keep their
// order inside one batch, a storm tick (every node once) is one wave, and a
// batch applied twice leaves the same rows.

const db = useMigratedDatabase({ limits: SMALL_POOL });

const node = async (name: string) => (await db.prisma.node.create({ data: { name, tokenHash: hashToken(generateToken('node')) } })).id;
const t = (s: number) => new Date(Date.UTC(2026, 11, 1, 6, 0, s)).toISOString();
const opened = (nodeId: string, sessionId: string, at: string): SessionFact => ({ kind: 'session.opened', nodeId, sessionId, at });
const closed = (nodeId: string, sessionId: string, at: string, reason: string, superseded = false): SessionFact => ({
  kind: 'session.closed',
  nodeId,
  sessionId,
  code: superseded ? 4003 : 4000,
  reason,
  at,
  lastFrameAt: at,
  superseded,
});

describe('batched session opens and closes', () => {
  it("keeps each node's order inside one batch: open, close, open leaves the node reachable; open, close leaves it unreachable", async () => {
    const [a, b, c] = [await node('batch-a'), await node('batch-b'), await node('batch-c')];
    const facts: DurableFact[] = [
      opened(a, 'ses_a1', t(1)),
      opened(c, 'ses_c1', t(1)),
      closed(a, 'ses_a1', t(2), 'idle a1'),
      opened(b, 'ses_b1', t(2)),
      opened(b, 'ses_b2', t(3)),
      closed(b, 'ses_b1', t(3), 'superseded b1', true),
      opened(a, 'ses_a2', t(4)),
      { kind: 'deployment.delivered', deploymentId: 'none', at: t(4) },
      closed(c, 'ses_c1', t(5), 'idle c1'),
    ];
    expect(await db.writer.apply(facts)).toHaveLength(facts.length);

    const rows = await db.prisma.node.findMany({ where: { id: { in: [a, b, c] } }, orderBy: { name: 'asc' } });
    const [na, nb, nc] = rows;
    // a: closed then reopened, in that order: reachable, with a1's teardown on record.
    expect(na).toMatchObject({ unreachableSince: null, lastTeardownReason: 'idle a1', lastTeardownAt: new Date(t(2)) });
    // b: superseded never marks a node unreachable.
    expect(nb).toMatchObject({ unreachableSince: null, lastTeardownReason: 'superseded b1' });
    // c: its close came last.
    expect(nc).toMatchObject({ unreachableSince: new Date(t(5)), lastTeardownReason: 'idle c1' });
    expect(nc!.lastSeenAt).toEqual(new Date(t(5)));

    const events = await db.prisma.sessionEvent.findMany({ where: { nodeId: a }, orderBy: { id: 'asc' }, select: { sessionId: true, kind: true } });
    expect(events).toEqual([
      { sessionId: 'ses_a1', kind: 'opened' },
      { sessionId: 'ses_a1', kind: 'closed' },
      { sessionId: 'ses_a2', kind: 'opened' },
    ]);

    // Applied again (a retry after a commit whose answer was lost): nothing changes.
    await db.writer.apply(facts);
    expect(await db.prisma.sessionEvent.count({ where: { nodeId: { in: [a, b, c] } } })).toBe(8);
    expect(await db.prisma.node.findUniqueOrThrow({ where: { id: a } })).toMatchObject({ unreachableSince: null, lastTeardownReason: 'idle a1' });
  });

  it('writes a storm tick (every node once) as one wave, and a node twice in a tick as two waves in order', async () => {
    // One statement for the 1,000 nodes: a thousand concurrent creates would queue on the two pooled
    // connections past their acquire timeout on a loaded machine.
    const created = await db.prisma.node.createManyAndReturn({
      data: Array.from({ length: 1_000 }, (_, i) => ({ name: `storm-${i}`, tokenHash: hashToken(generateToken('node')) })),
      select: { id: true },
    });
    const ids = created.map((row) => row.id);
    const tick = ids.map((id, i) => opened(id, `ses_storm_${i}`, t(10)));
    expect(sessionWaves(tick)).toHaveLength(1);
    const twice = [...tick, closed(ids[0]!, 'ses_storm_0', t(11), 'gone'), opened(ids[0]!, 'ses_storm_x', t(12))];
    const waves = sessionWaves(twice);
    expect(waves.map((w) => w.length)).toEqual([1_000, 1, 1]);
    expect(waves[1]![0]!.kind).toBe('session.closed');

    await db.writer.apply(twice);
    expect(await db.prisma.sessionEvent.count({ where: { sessionId: { startsWith: 'ses_storm_' } } })).toBe(1_002);
    expect(await db.prisma.node.count({ where: { id: { in: ids }, unreachableSince: null } })).toBe(1_000);
    expect(await db.prisma.node.findUniqueOrThrow({ where: { id: ids[0]! } })).toMatchObject({ lastTeardownReason: 'gone' });
  });
});
