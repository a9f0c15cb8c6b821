import type { Context } from '../context.js';
import { usage } from '../errors.js';
import { table } from '../output.js';

// tether audit: the audit trail (GET /v1/audit), newest first: the token's
// team's rows for a customer, every row for an operator.

interface AuditItem {
  at: string;
  actor: { tokenId: string | null; name: string | null; kind: string | null };
  action: string;
  target: { type: string; id: string | null };
  outcome: string;
  code: string | null;
  sourceAddress: string | null;
}

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** An ISO time, or an age like 30m / 2h / 7d, as an ISO time. */
function sinceTime(since: string): string {
  const age = /^(\d{1,6})([smhd])$/.exec(since);
  if (age) return new Date(Date.now() - Number(age[1]) * UNITS[age[2]!]!).toISOString();
  if (Number.isNaN(Date.parse(since))) throw usage(`--since takes an ISO time or an age like 2h (got ${since})`);
  return new Date(since).toISOString();
}

export async function audit(
  ctx: Context,
  args: string[],
  options: { since?: string; actor?: string; action?: string; outcome?: string; target?: string; tail?: string },
): Promise<number> {
  if (args.length > 0) throw usage(`tether audit takes options only (got ${args[0]})`);
  const limit = options.tail === undefined ? 50 : Number(options.tail);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw usage('--tail takes a whole number of rows, 1 to 10000');
  const query = new URLSearchParams();
  if (options.since !== undefined) query.set('from', sinceTime(options.since));
  if (options.actor !== undefined) query.set('actor', options.actor);
  if (options.action !== undefined) query.set('action', options.action);
  if (options.outcome !== undefined) query.set('outcome', options.outcome);
  if (options.target !== undefined) {
    const [type, ...id] = options.target.split('/');
    query.set('targetType', type!);
    if (id.length > 0) query.set('targetId', id.join('/'));
  }
  const client = ctx.client();
  const items: AuditItem[] = [];
  let cursor: string | null = null;
  do {
    const page = new URLSearchParams(query);
    page.set('limit', String(Math.min(500, limit - items.length)));
    if (cursor) page.set('cursor', cursor);
    const { body }: { body: { items: AuditItem[]; nextCursor: string | null } } = await client.call('GET', `/v1/audit?${page.toString()}`);
    items.push(...body.items);
    cursor = body.nextCursor;
  } while (cursor && items.length < limit);
  ctx.out.data({ items });
  ctx.out.say(
    items.length === 0
      ? 'no audit rows'
      : table(
          ['AT', 'ACTOR', 'ACTION', 'TARGET', 'OUTCOME', 'FROM'],
          items.map((i) => [
            i.at,
            i.actor.name ?? i.actor.tokenId ?? '-',
            i.action,
            `${i.target.type}${i.target.id ? ` ${i.target.id}` : ''}`,
            i.outcome === 'refused' ? `refused ${i.code ?? ''}`.trim() : i.outcome,
            i.sourceAddress ?? '-',
          ]),
        ),
  );
  return 0;
}
