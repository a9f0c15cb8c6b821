import type { FastifyBaseLogger } from 'fastify';
import type { Loop } from '@tether/common';
import { CLOSE_CODES } from '@tether/protocol';
import { healthOf, sqlOf, type Db } from '../db/database.js';
import type { Sql } from '../db/sql.js';
import { stringRecordOf } from '../db/json-columns.js';
import { LastGoodRead, refreshedRead } from '../db/last-good-read.js';
import { homeJoin, managedSql, whereServicesRunSql } from '../db/where-services-run.js';
import type { NodeFacts } from './node-health.js';

// The one node directory: what the database says of the nodes, kept in
// memory so every reader keeps answering from the last good read while the
// database is down. The fleet page and the per-node metrics read its
// snapshot, refreshed in a few whole-fleet queries (never one per row);
// GET /v1/sessions reads the node list now (`nodes()`), falling back to its
// last good read. Liveness never comes from here: the connected map says who
// is reachable (node-health.ts); this says who exists and what the history says.

/** The facts node health is judged on, and what the fleet page shows beside them. */
export type DirectoryNode = NodeFacts & {
  cordoned?: boolean;
  /** Cordoned and being emptied (POST /v1/nodes/:id/evacuate). */
  evacuating?: boolean;
  /** When an operator declared its host gone (POST /v1/nodes/:id/lost), ms; null: never. */
  lostAt?: number | null;
  labels?: Record<string, string>;
};

export interface DesiredService {
  id: string;
  name: string;
  replicas: number;
}

export interface DirectorySnapshot {
  /** Sorted by name. */
  nodes: DirectoryNode[];
  /** The same nodes by id. */
  byId: Map<string, DirectoryNode>;
  /**
   * Per node: the services it should run and how many replicas of each there: a service managed by allocations
   * with its run allocations that have a release on that node; any other service on its home node, with a
   * delivered or running deployment there.
   */
  services: Map<string, DesiredService[]>;
  /**
   * Per node: its allocations of managed services (run and stop) and when the newest status among them was
   * recorded (ms; null: none reported). A status is written only when it changed, so this moves with every change.
   */
  allocations: Map<string, { count: number; lastStatusAt: number | null }>;
  /** Per node: sessions killed by a missing ACK in the last 24 h (ACK-timeout session events). */
  missedAcks24h: Map<string, number>;
  /** When this snapshot was read (ms since epoch); 0 before the first read. */
  at: number;
}

const EMPTY: DirectorySnapshot = { nodes: [], byId: new Map(), services: new Map(), allocations: new Map(), missedAcks24h: new Map(), at: 0 };

/** A node as a session shows it, before the directory has read it. */
export function seenNode(id: string, name: string): DirectoryNode {
  return { id, name, decommissioned: false, lastSeenAt: null, unreachableSince: null, lastTeardownAt: null, lastTeardownReason: null, lastCloseCode: null };
}

const ms = (column: string) => `(extract(epoch FROM ${column}) * 1000)::float8`;
const whole = (v: number | null) => (v === null ? null : Math.round(v));

/** Every node by name, times as epoch milliseconds (close codes are the snapshot's business: null here). */
async function readNodes(sql: Sql): Promise<DirectoryNode[]> {
  const rows = await sql.rows<{ id: string; name: string; decommissioned: boolean; cordoned: boolean; evacuating: boolean; lost: number | null; labels: unknown; last_seen: number | null; unreachable: number | null; teardown: number | null; teardown_reason: string | null }>(
    `SELECT id, name, decommissioned, cordoned, evacuating, ${ms('lost_at')} AS lost, labels, ${ms('last_seen_at')} AS last_seen, ${ms('unreachable_since')} AS unreachable,
      ${ms('last_teardown_at')} AS teardown, last_teardown_reason AS teardown_reason
    FROM nodes ORDER BY name`,
  );
  // float8 of whole milliseconds: exact, but normalised to an integer like Date.getTime().
  return rows.map((n) => ({
    id: n.id,
    name: n.name,
    decommissioned: n.decommissioned,
    cordoned: n.cordoned,
    evacuating: n.evacuating,
    lostAt: whole(n.lost),
    labels: stringRecordOf(n.labels),
    lastSeenAt: whole(n.last_seen),
    unreachableSince: whole(n.unreachable),
    lastTeardownAt: whole(n.teardown),
    lastTeardownReason: n.teardown_reason,
    lastCloseCode: null,
  }));
}

export class NodeDirectory {
  private current: DirectorySnapshot = EMPTY;
  private readonly loop: Loop;
  private readonly list: LastGoodRead<DirectoryNode[]>;

  constructor(
    private readonly prisma: Db,
    logger: FastifyBaseLogger,
    refreshMs: number,
  ) {
    this.loop = refreshedRead({ name: 'node-directory', what: 'fleet directory', refreshMs, logger, read: () => this.refresh() });
    this.list = new LastGoodRead(() => readNodes(sqlOf(prisma)), healthOf(prisma));
  }

  /**
   * Every node, read now (one made a moment ago is in it); while the database cannot answer, the last
   * good read and when it was made. Close codes are the snapshot's, where it has read the node.
   */
  async nodes(): Promise<{ data: DirectoryNode[]; fromMemoryAt: Date | null }> {
    const { data, fromMemoryAt } = await this.list.read();
    const known = this.current.byId;
    return { data: data.map((n) => ({ ...n, lastCloseCode: known.get(n.id)?.lastCloseCode ?? null })), fromMemoryAt };
  }

  get snapshot(): DirectorySnapshot {
    return this.current;
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Reads now (a node just created shows without waiting a refresh). */
  trigger(): Promise<void> {
    return this.loop.trigger();
  }

  async refresh(): Promise<void> {
    // Plain SQL, times as epoch milliseconds: at 10,000 nodes the first read after a restart (every node
    // "changed") cost the panel about a second of Prisma result handling and GC right after it began
    // listening, in the middle of its fleet's reconnect storm (docs/benchmarks.md, "The storm, fourth round").
    const sql = sqlOf(this.prisma);
    const [nodes, services, allocations, acks] = await Promise.all([
      readNodes(sql),
      // Where each service runs (db/where-services-run.ts): a managed service's replicas where its allocations are
      // (on several nodes, a few on each), an unmanaged one's all on its home node.
      sql.rows<{ id: string; name: string; node_id: string; replicas: number }>(
        `SELECT s.id, s.name, w.node_id, w.replicas FROM (${whereServicesRunSql()}) w JOIN services s ON s.id = w.service_id
        ORDER BY 3, 2`,
      ),
      sql.rows<{ node_id: string; n: number; status_at: number | null }>(
        `SELECT a.node_id, count(*)::int AS n, ${ms('max(a.status_at)')} AS status_at FROM allocations a
          JOIN services s ON s.id = a.service_id ${homeJoin('s', 'h')}
        WHERE ${managedSql('s', 'h')}
        GROUP BY a.node_id`,
      ),
      sql.rows<{ node_id: string; n: number }>(
        `SELECT node_id, count(*)::int AS n FROM session_events
        WHERE kind = 'closed' AND close_code = $1 AND at > now() - interval '24 hours'
        GROUP BY node_id`,
        [CLOSE_CODES.ACK_TIMEOUT],
      ),
    ]);
    // The close code of each node's last real teardown (superseded closes leave the node reachable): read
    // for every node once, then only for nodes whose teardown time moved (by node id, on the (node_id, at) index).
    const previous = this.current.byId;
    const changed = nodes.filter((n) => {
      const before = previous.get(n.id);
      return !before || before.lastTeardownAt !== n.lastTeardownAt;
    });
    const codes = new Map<string, number | null>();
    for (const n of previous.values()) codes.set(n.id, n.lastCloseCode);
    if (changed.length > 0) {
      const lastCloses = await sql.rows<{ node_id: string; close_code: number | null }>(
        `SELECT DISTINCT ON (node_id) node_id, close_code FROM session_events
        WHERE node_id = ANY($1::text[]) AND kind = 'closed' AND close_code IS DISTINCT FROM $2
        ORDER BY node_id, at DESC, id DESC`,
        [changed.map((n) => n.id), CLOSE_CODES.SUPERSEDED],
      );
      for (const n of changed) codes.set(n.id, null);
      for (const r of lastCloses) codes.set(r.node_id, r.close_code);
    }
    const byNode = new Map<string, DesiredService[]>();
    for (const s of services) {
      const list = byNode.get(s.node_id) ?? [];
      list.push({ id: s.id, name: s.name, replicas: s.replicas });
      byNode.set(s.node_id, list);
    }
    const list: DirectoryNode[] = nodes.map((n) => ({ ...n, lastCloseCode: codes.get(n.id) ?? null }));
    this.current = {
      nodes: list,
      byId: new Map(list.map((n) => [n.id, n])),
      services: byNode,
      allocations: new Map(allocations.map((r) => [r.node_id, { count: r.n, lastStatusAt: whole(r.status_at) }])),
      missedAcks24h: new Map(acks.map((r) => [r.node_id, r.n])),
      at: Date.now(),
    };
  }
}
