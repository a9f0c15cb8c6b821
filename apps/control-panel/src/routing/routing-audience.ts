import type { Logger } from '@tether/common';
import { sqlOf, type Db } from '../db/database.js';
import { homeJoin, managedSql } from '../db/where-services-run.js';
import { servingNodes } from './serving-nodes.js';

// Which maps a change of a replica touches (issue 37). A routed service's
// remote endpoints are in the map of every node serving it, so a replica
// that starts, stops, turns unhealthy or loses its node's session changes
// those maps, not only its own node's. This turns "something happened on
// these nodes" (a session opened or closed, once recorded; an allocations
// status stored) into `routing.changed` for every node serving a routed,
// managed service with a replica there. Changes are gathered for a short
// window and looked up in one query pair, so a reconnect storm costs one
// lookup per window, not one per session; a window with nothing routed
// and managed behind it costs one cheap query.

export interface RoutingAudienceOptions {
  prisma: Db;
  /** Receives the nodes to push, with why (the `routing.changed` event). */
  changed: (nodeIds: string[], reason: string) => void;
  logger: Logger;
  /** How long changes are gathered before one lookup. */
  windowMs?: number;
}

export class RoutingAudience {
  private readonly nodes = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(private readonly options: RoutingAudienceOptions) {}

  /** Something about the replicas on this node changed (`reason` says what). */
  nodeChanged(nodeId: string, reason: string): void {
    if (this.stopped) return;
    if (!this.nodes.has(nodeId)) this.nodes.set(nodeId, reason);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.running = this.running.then(() => this.flush());
    }, this.options.windowMs ?? 50);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private async flush(): Promise<void> {
    const batch = [...this.nodes];
    this.nodes.clear();
    if (batch.length === 0) return;
    try {
      const sql = sqlOf(this.options.prisma);
      const services = await sql.rows<{ service_id: string; node_id: string }>(
        `SELECT DISTINCT a.service_id, a.node_id FROM allocations a JOIN services s ON s.id = a.service_id ${homeJoin('s', 'h')}
        WHERE a.node_id = ANY($1::text[]) AND ${managedSql('s', 'h')} AND EXISTS (SELECT 1 FROM routes r WHERE r.service_id = a.service_id)`,
        [batch.map(([nodeId]) => nodeId)],
      );
      if (services.length === 0) return;
      const serving = await servingNodes(sql, [...new Set(services.map((s) => s.service_id))]);
      const nodeIds = [...new Set(serving.map((s) => s.node_id))].sort();
      const reasons = new Map(batch);
      const why = [...new Set(services.map((s) => reasons.get(s.node_id)))].filter(Boolean).join('; ');
      if (nodeIds.length > 0) this.options.changed(nodeIds, `replicas changed: ${why}`);
    } catch (err) {
      // The periodic push (TETHER_RECONCILE_INTERVAL_MS) still carries every map; the agents' own probes drop dead endpoints meanwhile.
      this.options.logger.warn({ err }, 'could not find the nodes serving changed replicas');
    }
  }
}
