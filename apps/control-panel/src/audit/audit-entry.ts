import { randomBytes } from 'node:crypto';
import type { Tx } from '../db/database.js';
import { prismaSql } from '../db/sql.js';

// A row of the audit trail. A change's `success` row is written by the
// domain function in the change's own transaction (so a change the database
// rolls back leaves none); refusals and fleet-page sign-ins go through the
// ordered session-fact writer (they must survive a database outage).

export interface AuditActor {
  tokenId: string | null;
  name: string | null;
  /** operator | customer */
  kind: string | null;
}

/** Who asks, from where: built per request (http/audit-context.ts). */
export interface AuditContext {
  actor: AuditActor;
  /** The actor's team (customers); a row names the team of what changed. */
  teamId: string | null;
  requestId: string | null;
  sourceAddress: string | null;
}

export interface AuditChange {
  /** From AUDIT_ACTIONS (docs/api.md lists them). */
  action: string;
  targetType: string;
  targetId: string | null;
  /** The team the target belongs to; the actor's when absent. */
  teamId?: string | null;
}

/** A row as stored and spilled (times as ISO strings). */
export interface AuditRow {
  id: string;
  at: string;
  actorTokenId: string | null;
  actorName: string | null;
  actorKind: string | null;
  teamId: string | null;
  action: string;
  targetType: string;
  targetId: string | null;
  outcome: 'success' | 'refused';
  code: string | null;
  requestId: string | null;
  sourceAddress: string | null;
}

/** A request's id: random, so unique across panels without coordination. */
export const newRequestId = (): string => `req_${randomBytes(12).toString('base64url')}`;

let auditSeq = 0;

/**
 * Ids sort as the rows were made on one panel (rows of one change share a
 * millisecond, and GET /v1/audit orders by time, then id): the time, a
 * counter, then random characters that keep panels apart.
 */
export function newAuditId(): string {
  auditSeq = (auditSeq + 1) % 36 ** 4;
  return `aud_${Date.now().toString(36).padStart(9, '0')}${auditSeq.toString(36).padStart(4, '0')}${randomBytes(6).toString('base64url')}`;
}

export function auditRow(ctx: AuditContext, change: AuditChange, outcome: AuditRow['outcome'], code: string | null = null): AuditRow {
  return {
    id: newAuditId(),
    at: new Date().toISOString(),
    actorTokenId: ctx.actor.tokenId,
    actorName: ctx.actor.name,
    actorKind: ctx.actor.kind,
    teamId: change.teamId !== undefined ? change.teamId : ctx.teamId,
    action: change.action,
    targetType: change.targetType,
    targetId: change.targetId,
    outcome,
    code,
    requestId: ctx.requestId,
    sourceAddress: ctx.sourceAddress,
  };
}

/** Inserts rows; a row already stored (a retried write) is left as it is. */
export async function insertAuditRows(tx: Pick<Tx, '$executeRawUnsafe' | '$queryRawUnsafe'>, rows: readonly AuditRow[]): Promise<void> {
  if (rows.length === 0) return;
  if (rows.length === 1) {
    // The usual case (one change, one row): plain parameters, no JSON to build and unpack.
    const r = rows[0]!;
    await prismaSql(tx).run(
      `INSERT INTO audit_events (id, at, actor_token_id, actor_name, actor_kind, team_id, action, target_type, target_id, outcome, code, request_id, source_address)
      VALUES ($1, $2::timestamptz, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (id) DO NOTHING`,
      [r.id, r.at, r.actorTokenId, r.actorName, r.actorKind, r.teamId, r.action, r.targetType, r.targetId, r.outcome, r.code, r.requestId, r.sourceAddress],
    );
    return;
  }
  await prismaSql(tx).run(
    `INSERT INTO audit_events (id, at, actor_token_id, actor_name, actor_kind, team_id, action, target_type, target_id, outcome, code, request_id, source_address)
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(id text, at timestamptz, "actorTokenId" text, "actorName" text, "actorKind" text, "teamId" text,
      action text, "targetType" text, "targetId" text, outcome text, code text, "requestId" text, "sourceAddress" text)
    ON CONFLICT (id) DO NOTHING`,
    [JSON.stringify(rows)],
  );
}

/** A change's success row, in the change's transaction. No context (an internal caller): no row. */
export async function recordChange(tx: Tx, ctx: AuditContext | undefined, ...changes: AuditChange[]): Promise<void> {
  if (!ctx) return;
  await insertAuditRows(tx, changes.map((c) => auditRow(ctx, c, 'success')));
}
