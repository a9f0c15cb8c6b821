import { describe, expect, it } from 'vitest';
import { SMALL_POOL, useMigratedDatabase } from './helpers/migrated-database.js';
import { generateToken, hashToken } from '../src/domain/tokens.js';

// Times the session layer writes, on a database whose default time zone is not UTC (Prisma's DateTime
// columns are `timestamp` holding UTC; the pool's connections run in UTC, db/pg-pool.ts). The coalesced
// last-seen and token last-used times go as two JSON arrays (ids; epoch milliseconds) zipped in SQL, not as
// array parameters node-postgres would build element by element on the main thread: each time lands on its
// own row, to the millisecond, and never moves a newer time back. Session opens and closes land as sent.

const db = useMigratedDatabase({ zone: 'America/Sao_Paulo', limits: SMALL_POOL });

const node = async (name: string) => db.prisma.node.create({ data: { name, tokenHash: hashToken(generateToken('node')) } });

describe('coalesced times', () => {
  it('last-seen: each node its own time, to the millisecond; an older time does not move it back', async () => {
    const nodes = await Promise.all(['times-a', 'times-b', 'times-c'].map((n) => node(n)));
    const base = Date.UTC(2026, 11, 1, 12, 0, 0, 123);
    await db.writer.lastSeen(new Map(nodes.map((n, i) => [n.id, base + i * 1_001])));
    const read = async () => new Map((await db.prisma.node.findMany({ where: { id: { in: nodes.map((n) => n.id) } } })).map((n) => [n.id, n.lastSeenAt?.getTime()]));
    expect([...(await read()).entries()].sort()).toEqual(nodes.map((n, i) => [n.id, base + i * 1_001]).sort());
    await db.writer.lastSeen(
      new Map([
        [nodes[0]!.id, base - 5_000],
        [nodes[1]!.id, base + 60_007],
      ]),
    );
    const after = await read();
    expect(after.get(nodes[0]!.id)).toBe(base);
    expect(after.get(nodes[1]!.id)).toBe(base + 60_007);
    expect(after.get(nodes[2]!.id)).toBe(base + 2_002);
  });

  it('token last-used: the same, for API tokens; 10,000 ids in one flush', async () => {
    const token = await db.prisma.apiToken.create({ data: { name: 'times', role: 'operator', tokenHash: hashToken(`times-${Date.now()}`) } });
    const at = Date.UTC(2026, 11, 1, 13, 14, 15, 999);
    const unknown = Array.from({ length: 9_999 }, (_, i): [string, number] => [`absent-${i}`, at]);
    await db.writer.tokensUsed(new Map([...unknown, [token.id, at]]));
    const row = await db.prisma.apiToken.findUniqueOrThrow({ where: { id: token.id } });
    expect(row.lastUsedAt?.getTime()).toBe(at);
  });

  it('session opens and closes: the event times and the node row as sent, to the millisecond', async () => {
    const n = await node('times-session');
    const opened = Date.UTC(2026, 11, 1, 6, 0, 1, 234);
    const closed = Date.UTC(2026, 11, 1, 6, 5, 2, 345);
    const lastFrame = Date.UTC(2026, 11, 1, 6, 5, 0, 456);
    await db.writer.apply([{ kind: 'session.opened', nodeId: n.id, sessionId: 'tz-1', at: new Date(opened).toISOString() }]);
    await db.writer.apply([
      { kind: 'session.closed', nodeId: n.id, sessionId: 'tz-1', code: 4000, reason: 'idle', at: new Date(closed).toISOString(), lastFrameAt: new Date(lastFrame).toISOString(), superseded: false },
    ]);
    const events = await db.prisma.sessionEvent.findMany({ where: { sessionId: 'tz-1' }, orderBy: { at: 'asc' } });
    expect(events.map((e) => [e.kind, e.at.getTime()])).toEqual([['opened', opened], ['closed', closed]]);
    const row = await db.prisma.node.findUniqueOrThrow({ where: { id: n.id } });
    expect({ unreachable: row.unreachableSince?.getTime(), teardown: row.lastTeardownAt?.getTime(), seen: row.lastSeenAt?.getTime() }).toEqual({
      unreachable: closed,
      teardown: closed,
      seen: lastFrame,
    });
  });
});
