import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sqlOf } from '../src/db/database.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// Claims before welcome, batched: the claims of one loop turn are one statement (a restarted panel takes
// thousands a second), and each still takes its node's next generation; a node asked twice in one turn
// goes to the newer session.

let panel: Panel;
beforeAll(async () => {
  panel = await startPanel();
});
afterAll(async () => {
  await panel?.close();
});

describe('claims of one loop turn', () => {
  it('are one statement; each node takes its next generation; the newer of two sessions of a node wins, the older is refused', async () => {
    const cluster = panel.app.cluster!;
    const nodes = await Promise.all([0, 1, 2].map((i) => panel.createNode(`claim-${i}`)));
    const before = await cluster.claim(nodes[0]!.id, 'sess-before');
    const spy = vi.spyOn(sqlOf(panel.prisma), 'rows');
    try {
      const claims = [
        cluster.claim(nodes[0]!.id, 'sess-a1'),
        cluster.claim(nodes[1]!.id, 'sess-b'),
        cluster.claim(nodes[0]!.id, 'sess-a2'),
        cluster.claim(nodes[2]!.id, 'sess-c'),
      ].map((p) => p.then((g) => ({ ok: g }), (err: Error & { code?: string }) => ({ refused: err.code })));
      const results = await Promise.all(claims);
      expect(results).toEqual([{ refused: 'PANEL_LEASE_LOST' }, { ok: 1 }, { ok: before + 1 }, { ok: 1 }]);
      const claimStatements = spy.mock.calls.filter((call) => call[0].includes('INSERT INTO node_owners'));
      expect(claimStatements).toHaveLength(1);
    } finally {
      spy.mockRestore();
    }
    const owners = await panel.prisma.$queryRaw<{ node_id: string; session_id: string; generation: bigint }[]>`
      SELECT node_id, session_id, generation FROM node_owners WHERE node_id = ANY(${nodes.map((n) => n.id)}::text[]) ORDER BY node_id`;
    const byNode = new Map(owners.map((o) => [o.node_id, [o.session_id, Number(o.generation)]]));
    expect(byNode.get(nodes[0]!.id)).toEqual(['sess-a2', before + 1]);
    expect(byNode.get(nodes[1]!.id)).toEqual(['sess-b', 1]);
    expect(cluster.generationOf('sess-a2')).toBe(before + 1);
    expect(cluster.generationOf('sess-a1')).toBeUndefined();
  });
});
