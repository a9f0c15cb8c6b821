import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqlOf } from '../src/db/database.js';
import { NodeReportWriter, readReports, readReportsChanged } from '../src/cluster/node-reports.js';
import type { AgentSession } from '../src/sessions/session.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// The report rows other panels answer status from. At each lease renewal a panel reads the rows changed
// since its last read; its own rows come back without their content (it holds those sessions), so a panel
// that just took back 10,000 agents does not parse 10,000 reports it wrote itself.

let panel: Panel;
beforeAll(async () => {
  panel = await startPanel();
});
afterAll(async () => {
  await panel?.close();
});

const containers = [{ name: 'web', image: 'nginx:1', state: 'running' }];

async function writeRow(nodeId: string, panelId: string, generation: number): Promise<void> {
  await sqlOf(panel.prisma).run(
    `INSERT INTO node_reports (node_id, panel_id, session_id, generation, state, last_frame_at, report, updated_at)
     VALUES ($1, $2, $3, $4, 'connected', now(), $5::jsonb, now())
     ON CONFLICT (node_id) DO UPDATE SET panel_id = EXCLUDED.panel_id, generation = EXCLUDED.generation,
       report = EXCLUDED.report, updated_at = now()`,
    [nodeId, panelId, `sess-${nodeId}-${generation}`, generation, JSON.stringify({ containers, agentVersion: '1.2.3', heartbeats: 7 })],
  );
}

describe('report rows', () => {
  it("changed since the last read: other panels' rows whole, this panel's own without content; then only newer rows", async () => {
    const self = panel.app.panelStatus.ownership!.panelId;
    const [mine, theirs, later] = await Promise.all(['rep-mine', 'rep-theirs', 'rep-later'].map((n) => panel.createNode(n)));
    await writeRow(mine!.id, self, 3);
    await writeRow(theirs!.id, 'panel-elsewhere', 5);
    // updated_at keeps milliseconds and the read's time comes back as a millisecond Date: a row written in the
    // read's own millisecond is read again next time (harmless), so the rows here are written well before it.
    await new Promise((r) => setTimeout(r, 5));

    const first = await readReportsChanged(panel.prisma, null, self);
    const byNode = new Map(first.reports.map((r) => [r.nodeId, r]));
    expect(byNode.get(theirs!.id)).toMatchObject({ panelId: 'panel-elsewhere', generation: 5, state: 'connected', containers, live: false });
    expect(byNode.get(theirs!.id)!.extra).toMatchObject({ agentVersion: '1.2.3', heartbeats: 7 });
    expect(byNode.get(mine!.id)).toMatchObject({ panelId: self, generation: 3, state: 'connected', containers: [] });
    expect(byNode.get(mine!.id)!.extra).toMatchObject({ agentVersion: null, heartbeats: 0 });

    // The read's time is the database's: a row written after it is read next time, the earlier ones are not.
    await new Promise((r) => setTimeout(r, 5));
    await writeRow(later!.id, 'panel-elsewhere', 1);
    const next = await readReportsChanged(panel.prisma, first.readAt, self);
    expect(next.reports.map((r) => r.nodeId)).toEqual([later!.id]);
    expect(next.readAt.getTime()).toBeGreaterThanOrEqual(first.readAt.getTime());
  });

  it("read by node for status: every row whole, this panel's own too, with whether it is live evidence", async () => {
    const self = panel.app.panelStatus.ownership!.panelId;
    const node = await panel.createNode('rep-status');
    await writeRow(node.id, self, 9);
    const rows = await readReports(panel.prisma, [node.id]);
    // No owner row at generation 9, so not live evidence, but the content is there.
    expect(rows.get(node.id)).toMatchObject({ panelId: self, generation: 9, containers, live: false, source: 'report-row' });
    const all = await readReports(panel.prisma, undefined);
    expect(all.get(node.id)?.containers).toEqual(containers);
  });
});

describe('the report writer', () => {
  it("re-writes an unchanged report after the refresh window only while another panel is live; a change is written either way", async () => {
    const node = await panel.createNode('rep-refresh');
    await sqlOf(panel.prisma).run(`INSERT INTO node_owners (node_id, panel_id, session_id, generation, claimed_at) VALUES ($1, 'panel-w', 'sess-w', 4, now())`, [node.id]);
    let othersLive = false;
    const writer = new NodeReportWriter({
      prisma: panel.prisma,
      panelId: 'panel-w',
      flushMs: 10,
      refreshMs: 1_000,
      othersLive: () => othersLive,
      generationOf: () => 4,
      logger: panel.app.log,
    });
    const report = { containers: [], runtime: null, routing: null };
    // The fields the writer reads of a session; the report's objects are kept while unchanged (report.ts).
    const session = { id: 'sess-w', nodeId: node.id, lastFrameAt: Date.now(), report, heartbeats: 0, missedAcks: 0, agentVersion: 't', peer: 'p', openedAt: 0 };
    const frameAt = async () => {
      const rows = await sqlOf(panel.prisma).rows<{ last_frame_at: Date }>(`SELECT last_frame_at FROM node_reports WHERE node_id = $1`, [node.id]);
      return rows[0]?.last_frame_at.getTime();
    };
    const observe = async (lastFrameAt: number) => {
      session.lastFrameAt = lastFrameAt;
      writer.observe(session as unknown as AgentSession, 'connected');
      await writer.stop();
    };
    const t0 = Date.now();
    try {
      await observe(t0);
      expect(await frameAt()).toBe(t0);
      // Alone: frames past the refresh window write nothing while the report is unchanged.
      await observe(t0 + 5_000);
      expect(await frameAt()).toBe(t0);
      // Another panel live: the next frame re-writes the row.
      othersLive = true;
      await observe(t0 + 6_000);
      expect(await frameAt()).toBe(t0 + 6_000);
      // Within the window, nothing; a changed report is written alone or not.
      othersLive = false;
      await observe(t0 + 6_500);
      expect(await frameAt()).toBe(t0 + 6_000);
      session.report = { ...report, containers: [] };
      await observe(t0 + 7_000);
      expect(await frameAt()).toBe(t0 + 7_000);
    } finally {
      await writer.stop();
    }
  });
});
