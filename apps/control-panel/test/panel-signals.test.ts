import { afterAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import { waitFor } from '@tether/testkit';
import type { Db } from '../src/db/database.js';
import { NodeReportWriter } from '../src/cluster/node-reports.js';
import { PanelSignals, type Signal } from '../src/cluster/panel-signals.js';
import type { AgentSession } from '../src/sessions/session.js';
import { useMigratedDatabase } from './helpers/migrated-database.js';
import { PrimaryLocator } from '../src/db/primary-locator.js';

// The signals between panels on their own (issue 10): a cross-panel deploy
// waits on two of them, so they go out on the dedicated LISTEN connection (not
// behind the pool's batch writers), the owner is found and asked in one
// statement, and nothing signals what no panel acts on (report rows).

const db = useMigratedDatabase();
const started: PanelSignals[] = [];

/** A pool that refuses everything: what still gets through did not use it. */
const brokenPool = new Proxy({} as Db, {
  get: () => () => Promise.reject(new Error('the pool was used')),
});

function signals(panelId: string, pool: Db = db.prisma): PanelSignals {
  const s = new PanelSignals({ servers: PrimaryLocator.forUrl(db.url, 5_000), prisma: pool, connectTimeoutMs: 5_000, queryTimeoutMs: 5_000, logger: silentLogger, panelId });
  started.push(s);
  return s;
}

/** Signals with LISTEN up, and what they received. */
async function listening(panelId: string, pool: Db = db.prisma): Promise<{ signals: PanelSignals; received: Signal[] }> {
  const s = signals(panelId, pool);
  const received: Signal[] = [];
  s.on('signal', (signal) => received.push(signal));
  const up = new Promise<void>((resolve) => s.once('connected', () => resolve()));
  s.start();
  await up;
  return { signals: s, received };
}

afterAll(async () => {
  await Promise.all(started.map((s) => s.stop()));
});

describe('signals between panels', () => {
  it('go out on the LISTEN connection while it is up (a broken pool does not stop them), on the pool before', async () => {
    const b = await listening('panel-b');
    const { signals: a } = await listening('panel-a', brokenPool);
    await a.send('deployed', 'panel-a', ['dep-1']);
    await waitFor(() => b.received.find((s) => s.ids.includes('dep-1')));
    expect(b.received.find((s) => s.ids.includes('dep-1'))).toEqual({ kind: 'deployed', panel: 'panel-a', ids: ['dep-1'] });

    // Not listening (yet, or while it reconnects): the pool carries them.
    const c = signals('panel-c');
    await c.send('deployed', 'panel-c', ['dep-2']);
    await waitFor(() => b.received.find((s) => s.ids.includes('dep-2')));
  });

  it('find the live owner and ask it in one statement; none (self, expired lease, no row): nothing sent', async () => {
    const b = await listening('panel-b2');
    const { signals: a } = await listening('panel-a2', brokenPool);
    await db.prisma.$executeRawUnsafe(
      `INSERT INTO panels (id, lease_until, renewed_at) VALUES ('panel-b2', now() + interval '1 minute', now()), ('panel-a2', now() + interval '1 minute', now()), ('panel-gone', now() - interval '1 second', now())`,
    );
    await db.prisma.$executeRawUnsafe(`INSERT INTO nodes (id, name, token_hash) VALUES ('sig-n1', 'sig-n1', 'h1'), ('sig-n2', 'sig-n2', 'h2'), ('sig-n3', 'sig-n3', 'h3'), ('sig-n4', 'sig-n4', 'h4')`);
    await db.prisma.$executeRawUnsafe(
      `INSERT INTO node_owners (node_id, panel_id, session_id, generation, claimed_at) VALUES ('sig-n1', 'panel-b2', 's1', 1, now()), ('sig-n2', 'panel-a2', 's2', 1, now()), ('sig-n3', 'panel-gone', 's3', 1, now())`,
    );

    expect(await a.askOwner('sig-n1', 'dep-owned')).toBe('panel-b2');
    expect(await a.askOwner('sig-n2', 'dep-self')).toBeUndefined();
    expect(await a.askOwner('sig-n3', 'dep-expired')).toBeUndefined();
    expect(await a.askOwner('sig-n4', 'dep-none')).toBeUndefined();
    await a.send('deployed', 'panel-a2', ['marker']);
    await waitFor(() => b.received.find((s) => s.ids.includes('marker')));
    const deploys = b.received.filter((s) => s.kind === 'deploy');
    expect(deploys).toEqual([{ kind: 'deploy', panel: 'panel-b2', ids: ['dep-owned'] }]);
  });

  it('a report row written sends no signal (no panel acts on one)', async () => {
    const b = await listening('panel-b3');
    await db.prisma.$executeRawUnsafe(`INSERT INTO nodes (id, name, token_hash) VALUES ('rep-n1', 'rep-n1', 'hr1')`);
    await db.prisma.$executeRawUnsafe(`INSERT INTO node_owners (node_id, panel_id, session_id, generation, claimed_at) VALUES ('rep-n1', 'panel-a3', 'rs1', 1, now())`);
    const writer = new NodeReportWriter({ prisma: db.prisma, panelId: 'panel-a3', flushMs: 10, refreshMs: 10_000, othersLive: () => true, generationOf: () => 1, logger: silentLogger });
    const session = { id: 'rs1', nodeId: 'rep-n1', report: undefined, lastFrameAt: Date.now(), heartbeats: 1, missedAcks: 0, agentVersion: 'x', peer: '127.0.0.1', openedAt: Date.now() };
    writer.observe(session as unknown as AgentSession, 'connected');
    await waitFor(async () => (await db.prisma.nodeReport.findUnique({ where: { nodeId: 'rep-n1' } })) ?? undefined);
    await writer.stop();
    // NOTIFYs arrive in commit order: one sent after the write comes after any the write would have sent.
    const c = signals('panel-c3');
    await c.send('deployed', 'panel-c3', ['after-report']);
    await waitFor(() => b.received.find((s) => s.ids.includes('after-report')));
    expect(b.received.filter((s) => s.kind === 'report')).toEqual([]);
  });
});
