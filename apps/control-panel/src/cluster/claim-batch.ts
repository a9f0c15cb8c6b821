import { TickBatcher } from '@tether/common';
import { sqlOf, type Db } from '../db/database.js';
import { OPEN_READ_LINGER_MS } from '../session-writes/session-store.js';

// The claims of one turn of the loop as one statement. A restarted panel
// takes thousands of sessions a second; a claim each was a transaction (and a
// NOTIFY commit, which PostgreSQL serialises) per open. Each claim still
// succeeds only while the panel's lease is live by the database's clock, still
// takes its node's next generation and still NOTIFYs every panel with it.
// The next generation is above the fencing floor (timeline-fence.ts): after a
// promotion that lost commits, a row may hold an older generation than a
// panel still holds in memory.

export class ClaimBatch {
  /** The node each pending claim (by session id) is for. */
  private readonly nodeOf = new Map<string, string>();
  private readonly batcher = new TickBatcher<string, number>((sessionIds) => this.claimMany(sessionIds), 1_000, 2, OPEN_READ_LINGER_MS);

  constructor(
    private readonly prisma: Db,
    private readonly panelId: string,
  ) {}

  /** The generation the session's claim took; undefined when it was refused (lease not live, or a newer session of the node in the batch). */
  async claim(nodeId: string, sessionId: string): Promise<number | undefined> {
    this.nodeOf.set(sessionId, nodeId);
    try {
      return await this.batcher.load(sessionId);
    } finally {
      this.nodeOf.delete(sessionId);
    }
  }

  private async claimMany(sessionIds: string[]): Promise<Map<string, number>> {
    // Each node once per statement (ON CONFLICT cannot touch a row twice): the session asked last is the newer and wins.
    const latest = new Map<string, string>();
    for (const sessionId of sessionIds) latest.set(this.nodeOf.get(sessionId)!, sessionId);
    const nodeIds = [...latest.keys()];
    const sessions = [...latest.values()];
    const prefix = `owner:${this.panelId}:`;
    const rows = await sqlOf(this.prisma).rows<{ session_id: string; generation: string | bigint }>(
      `WITH lease AS (SELECT 1 FROM panels WHERE id = $1::text AND lease_until > now()),
      floor AS (SELECT COALESCE(max(floor), 0) AS floor FROM fencing_floors),
      c AS (
        INSERT INTO node_owners (node_id, panel_id, session_id, generation, claimed_at)
        SELECT v.node_id, $1::text, v.session_id, floor.floor + 1, now()
        FROM unnest($2::text[], $3::text[]) AS v(node_id, session_id), lease, floor
        ON CONFLICT (node_id) DO UPDATE SET panel_id = EXCLUDED.panel_id, session_id = EXCLUDED.session_id,
          generation = GREATEST(node_owners.generation + 1, EXCLUDED.generation), claimed_at = now()
        RETURNING node_id, session_id, generation
      )
      SELECT session_id, generation, pg_notify('tether_panels', $4::text || node_id || '/' || generation::text)::text AS sent FROM c`,
      [this.panelId, nodeIds, sessions, prefix],
    );
    return new Map(rows.map((r) => [r.session_id, Number(r.generation)]));
  }
}
