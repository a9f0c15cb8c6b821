import { sqlOf, type Db } from '../db/database.js';
import { AppError } from '../errors.js';
import type { AuthContext } from './access.js';

// GET /v1/audit: newest first, filtered, paged by an opaque cursor (the last
// row's time and id). Operators read every row; a customer its team's.

export interface AuditFilter {
  from?: string;
  to?: string;
  actor?: string;
  targetType?: string;
  targetId?: string;
  action?: string;
  outcome?: 'success' | 'refused';
  teamId?: string;
  limit: number;
  cursor?: string;
}

interface Row {
  id: string;
  at: Date;
  actor_token_id: string | null;
  actor_name: string | null;
  actor_kind: string | null;
  team_id: string | null;
  action: string;
  target_type: string;
  target_id: string | null;
  outcome: string;
  code: string | null;
  request_id: string | null;
  source_address: string | null;
}

const present = (r: Row) => ({
  id: r.id,
  at: r.at.toISOString(),
  actor: { tokenId: r.actor_token_id, name: r.actor_name, kind: r.actor_kind },
  teamId: r.team_id,
  action: r.action,
  target: { type: r.target_type, id: r.target_id },
  outcome: r.outcome,
  code: r.code,
  requestId: r.request_id,
  sourceAddress: r.source_address,
});

const encodeCursor = (r: Row) => Buffer.from(`${r.at.toISOString()}|${r.id}`).toString('base64url');

function decodeCursor(cursor: string): { at: string; id: string } {
  const [at, id] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  if (!at || !id || Number.isNaN(Date.parse(at))) throw new AppError('VALIDATION_FAILED', 'cursor is not one this endpoint gave');
  return { at, id };
}

export async function listAudit(prisma: Db, auth: AuthContext, filter: AuditFilter) {
  const where: string[] = [];
  const values: unknown[] = [];
  const add = (sql: string, value: unknown) => {
    values.push(value);
    where.push(sql.replace('?', `$${values.length}`));
  };
  if (auth.role === 'customer') {
    if (!auth.teamId) throw new AppError('FORBIDDEN', 'this customer token has no team');
    add('team_id = ?', auth.teamId);
  } else if (filter.teamId) add('team_id = ?', filter.teamId);
  if (filter.from) add('at >= ?::timestamptz', filter.from);
  if (filter.to) add('at < ?::timestamptz', filter.to);
  if (filter.actor) add('actor_token_id = ?', filter.actor);
  if (filter.targetType) add('target_type = ?', filter.targetType);
  if (filter.targetId) add('target_id = ?', filter.targetId);
  if (filter.action) add('action = ?', filter.action);
  if (filter.outcome) add('outcome = ?', filter.outcome);
  if (filter.cursor) {
    const c = decodeCursor(filter.cursor);
    values.push(c.at, c.id);
    where.push(`(at, id) < ($${values.length - 1}::timestamptz, $${values.length})`);
  }
  values.push(filter.limit + 1);
  const rows = await sqlOf(prisma).rows<Row>(
    `SELECT * FROM audit_events ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY at DESC, id DESC LIMIT $${values.length}`,
    values,
  );
  const page = rows.slice(0, filter.limit);
  return { items: page.map(present), nextCursor: rows.length > filter.limit ? encodeCursor(page.at(-1)!) : null };
}

/** How often rows past the retention are deleted. */
export const AUDIT_RETENTION_INTERVAL_MS = 3_600_000;

/** Deletes rows older than the retention; resolves with how many. */
export async function pruneAudit(prisma: Db, retentionDays: number): Promise<number> {
  if (retentionDays === 0) return 0;
  return sqlOf(prisma).run(`DELETE FROM audit_events WHERE at < now() - make_interval(days => $1)`, [retentionDays]);
}
