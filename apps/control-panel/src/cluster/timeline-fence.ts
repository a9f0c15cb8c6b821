import { CLOSE_CODES } from '@tether/protocol';
import type { Logger } from '@tether/common';
import { sqlOf, type Db } from '../db/database.js';
import type { SessionGenerations } from '../sessions/generations.js';
import type { SessionRegistry } from '../sessions/registry.js';

// Fencing across a PostgreSQL promotion (issue 39). With asynchronous
// replication the promoted server may have lost the newest claims: a node's
// row can hold an older generation than a panel holds in memory, and the next
// claim would hand out that generation a second time (two panels, one node,
// one generation: neither supersedes the other). So a panel that reaches a
// server on a timeline higher than any it saw writes the highest generation
// it holds into that timeline's floor (claims take generations above every
// floor: claim-batch.ts), then checks each of its sessions against its node's
// row: a row behind its memory is claimed again (above the floor), a row at
// or past it naming another session wins and the session here is closed
// SUPERSEDED. Claims wait until that check is done.

export interface FenceClaims {
  claim(nodeId: string, sessionId: string): Promise<number | undefined>;
}

export class TimelineFence {
  #seen = 0;
  #done: Promise<void> = Promise.resolve();
  /** The highest timeline whose check this panel finished (tests and the internal status read it). */
  fencedTimeline = 0;

  constructor(
    private readonly options: {
      prisma: Db;
      panelId: string;
      generations: SessionGenerations;
      registry: Pick<SessionRegistry, 'list'>;
      claims: FenceClaims;
      logger: Logger;
      /** The scheduler's epoch this panel holds (scheduler-lease.ts), raised above the same way; 0: none. */
      schedulerEpoch?: () => number;
    },
  ) {}

  /** Resolves once the check for the newest timeline seen has run (at once when none is pending). */
  settled(): Promise<void> {
    return this.#done;
  }

  /** The database server this panel writes to is on `timeline` (db/primary-locator.ts tells every change). */
  reached(timeline: number): void {
    if (timeline <= this.#seen) return;
    const first = this.#seen === 0;
    this.#seen = timeline;
    this.#done = this.#done
      .then(() => this.fence(timeline, first))
      .catch((err: unknown) => this.options.logger.error({ err, timeline }, 'fencing after a database failover failed; claims go on above the floor other panels wrote'));
  }

  private async fence(timeline: number, first: boolean): Promise<void> {
    const { prisma, panelId, generations, registry, claims, logger } = this.options;
    const sql = sqlOf(prisma);
    const held = generations.highest();
    await sql.rows(
      `INSERT INTO fencing_floors (timeline, floor, scheduler_epoch, raised_at) VALUES ($1::int, $2::bigint, $3::bigint, now())
       ON CONFLICT (timeline) DO UPDATE SET floor = GREATEST(fencing_floors.floor, EXCLUDED.floor),
         scheduler_epoch = GREATEST(fencing_floors.scheduler_epoch, EXCLUDED.scheduler_epoch), raised_at = now()`,
      [timeline, held, this.options.schedulerEpoch?.() ?? 0],
    );
    const sessions = registry.list();
    if (sessions.length === 0) return void (this.fencedTimeline = timeline);
    const rows = await sql.rows<{ node_id: string; panel_id: string; session_id: string; generation: string | bigint }>(
      'SELECT node_id, panel_id, session_id, generation FROM node_owners WHERE node_id = ANY($1::text[])',
      [sessions.map((s) => s.nodeId)],
    );
    const byNode = new Map(rows.map((r) => [r.node_id, r]));
    let reclaimed = 0;
    let superseded = 0;
    for (const session of sessions) {
      const mine = generations.get(session.id);
      if (mine === undefined) continue;
      const row = byNode.get(session.nodeId);
      const stored = row ? Number(row.generation) : 0;
      if (row && stored === mine && row.panel_id === panelId && row.session_id === session.id) continue;
      if (stored >= mine) {
        superseded++;
        session.teardown(CLOSE_CODES.SUPERSEDED, `the database (timeline ${timeline}) names a session of the node at generation ${stored} on panel ${row!.panel_id}`);
        continue;
      }
      const generation = await claims.claim(session.nodeId, session.id);
      if (generation === undefined) session.teardown(CLOSE_CODES.GOING_AWAY, `panel ${panelId} could not claim the node again after a database failover`);
      else {
        generations.set(session.id, generation);
        reclaimed++;
      }
    }
    this.fencedTimeline = timeline;
    if (!first || reclaimed + superseded > 0) logger.warn({ timeline, floor: held, reclaimed, superseded }, 'database on a new timeline: fencing floor raised, sessions checked');
  }
}
