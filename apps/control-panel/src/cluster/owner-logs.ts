import type { Db } from '../db/database.js';
import type { RemoteLogs } from '../log-streams/log-proxy.js';
import type { LogRequest } from '../log-streams/log-relay.js';
import type { PeerClient } from './peer-client.js';

// Log streams of nodes whose session another live panel holds: the owner is
// read from node_owners (its lease live by the database's clock) and asked
// over its internal URL; log-streams/log-proxy.ts passes the answer on.

export class OwnerLogs implements RemoteLogs {
  constructor(
    private readonly prisma: Db,
    private readonly selfId: string,
    private readonly peers: PeerClient,
  ) {}

  async open(nodeId: string, request: LogRequest, signal: AbortSignal) {
    const rows = await this.prisma.$queryRaw<{ panel_id: string; internal_url: string | null }[]>`
      SELECT w.panel_id, p.internal_url FROM node_owners w JOIN panels p ON p.id = w.panel_id
      WHERE w.node_id = ${nodeId}::text AND p.lease_until > now() AND w.panel_id <> ${this.selfId}::text`;
    const owner = rows[0];
    if (!owner) return null;
    const query = new URLSearchParams({ follow: String(request.follow) });
    if (request.tail !== null) query.set('tail', String(request.tail));
    if (request.since !== null) query.set('since', request.since);
    const upstream = await this.peers.openLogs({ panelId: owner.panel_id, internalUrl: owner.internal_url }, request.serviceId, query, signal);
    return { panelId: owner.panel_id, upstream };
  }
}
