import type { Db } from '../../src/db/database.js';

/**
 * Makes a node live on panel `owner` as the cluster writes it (the owner row and the connected report row of
 * one generation; the panel's lease row is the caller's), for scheduler tests without agents.
 */
export async function markLive(prisma: Db, nodeId: string, name: string, panel = 'owner'): Promise<void> {
  await prisma.$executeRawUnsafe(`INSERT INTO node_owners (node_id, panel_id, session_id, generation, claimed_at) VALUES ($1, $2, $3, 1, now())`, nodeId, panel, `sess-${name}`);
  await prisma.$executeRawUnsafe(
    `INSERT INTO node_reports (node_id, panel_id, session_id, generation, state, last_frame_at, report, updated_at) VALUES ($1, $2, $3, 1, 'connected', now(), '{}', now())`,
    nodeId,
    panel,
    `sess-${name}`,
  );
}
