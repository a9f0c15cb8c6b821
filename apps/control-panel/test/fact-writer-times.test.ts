import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../src/domain/tokens.js';
import { PrismaFactWriter } from '../src/session-writes/fact-writer.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// The coalesced last-seen and token last-used times go to the database as two JSON arrays (ids; epoch
// milliseconds) zipped in SQL, not as array parameters node-postgres would build element by element on the
// main thread. Each time lands on its own row, to the millisecond, and never moves a newer time back.

let panel: Panel;
beforeAll(async () => {
  panel = await startPanel();
});
afterAll(async () => {
  await panel?.close();
});

describe('coalesced times', () => {
  it('last-seen: each node its own time, to the millisecond; an older time does not move it back', async () => {
    const writer = new PrismaFactWriter(panel.prisma, { maxWait: 2_000, timeout: 5_000 });
    const nodes = await Promise.all(['times-a', 'times-b', 'times-c'].map((n) => panel.createNode(n)));
    const base = Date.UTC(2026, 11, 1, 12, 0, 0, 123);
    await writer.lastSeen(nodes.map((n, i) => ({ nodeId: n.id, at: new Date(base + i * 1_001) })));
    const read = async () => new Map((await panel.prisma.node.findMany({ where: { id: { in: nodes.map((n) => n.id) } } })).map((n) => [n.id, n.lastSeenAt?.getTime()]));
    expect([...(await read()).entries()].sort()).toEqual(nodes.map((n, i) => [n.id, base + i * 1_001]).sort());
    await writer.lastSeen([
      { nodeId: nodes[0]!.id, at: new Date(base - 5_000) },
      { nodeId: nodes[1]!.id, at: new Date(base + 60_007) },
    ]);
    const after = await read();
    expect(after.get(nodes[0]!.id)).toBe(base);
    expect(after.get(nodes[1]!.id)).toBe(base + 60_007);
    expect(after.get(nodes[2]!.id)).toBe(base + 2_002);
  });

  it('token last-used: the same, for API tokens; 10,000 ids in one flush', async () => {
    const writer = new PrismaFactWriter(panel.prisma, { maxWait: 2_000, timeout: 5_000 });
    const token = await panel.prisma.apiToken.create({ data: { name: 'times', role: 'operator', tokenHash: hashToken(`times-${Date.now()}`) } });
    const at = Date.UTC(2026, 11, 1, 13, 14, 15, 999);
    const unknown = Array.from({ length: 9_999 }, (_, i) => ({ tokenId: `absent-${i}`, at: new Date(at) }));
    await writer.tokensUsed([...unknown, { tokenId: token.id, at: new Date(at) }]);
    const row = await panel.prisma.apiToken.findUniqueOrThrow({ where: { id: token.id } });
    expect(row.lastUsedAt?.getTime()).toBe(at);
  });
});
