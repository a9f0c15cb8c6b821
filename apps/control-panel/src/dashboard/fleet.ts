import type { FastifyBaseLogger } from 'fastify';
import type { PanelConfig } from '../config.js';
import type { Db } from '../db/database.js';
import type { PanelMetrics } from '../panel-metrics.js';
import type { RoutingView } from '../routing/routing-reconciler.js';
import type { SessionRegistry } from '../sessions/registry.js';
import { freshRouteProbes } from '../status/route-health.js';
import { SignInCookies, type Claim } from './sign-in-cookies.js';
import { FleetFeed } from './fleet-feed.js';
import { fleetRows, type FleetRow, type RowSources } from './fleet-rows.js';
import { NodeDirectory, seenNode, type DirectoryNode } from '../node-health/node-directory.js';
import type { ClusterProof } from '../node-health/node-health.js';
import { OperatorTokens } from './operator-tokens.js';
import { SignedOutCookies } from './signed-out-cookies.js';

// Session health for people and for Prometheus, made in one place: the node
// directory (database facts, cached), the rows (directory + connected map),
// the live feed, the cookie sessions and the cached operator tokens. The
// per-node metrics read the same rows as the page.

export interface Fleet {
  directory: NodeDirectory;
  tokens: OperatorTokens;
  cookies: SignInCookies;
  signedOut: SignedOutCookies;
  /** A cookie's claim that is still good: its token valid, the cookie not signed out, not expired. */
  accepts(claim: Claim): boolean;
  feed: FleetFeed;
  sources: RowSources;
  rows(): FleetRow[];
  start(): void;
  stop(): Promise<void>;
}

/** Rows are computed at most this often; a scrape and a batch in the same moment share them. */
const ROWS_CACHE_MS = 200;

export function createFleet(deps: {
  config: PanelConfig;
  prisma: Db;
  registry: SessionRegistry;
  routing: RoutingView;
  metrics: PanelMetrics;
  logger: FastifyBaseLogger;
  /** Several panels: a node whose session another live panel holds is that panel's to export (per-node metrics). */
  heldElsewhere?: (nodeId: string) => boolean;
  /** Several panels: this panel's lease and a node's live session on another panel (its rows read reachable here too). */
  cluster?: ClusterProof;
}): Fleet {
  const { config, metrics } = deps;
  const d = config.dashboard;
  const directory = new NodeDirectory(deps.prisma, deps.logger, d.fleetRefreshMs);
  const tokens = new OperatorTokens(deps.prisma, deps.logger, d.fleetRefreshMs);
  const signedOut = new SignedOutCookies(deps.prisma, deps.logger, d.fleetRefreshMs);
  const publicUrl = config.publicUrl ?? `http://${config.host}:${config.port}`;
  const cookies = new SignInCookies({ secret: d.secret, ttlMs: d.cookieTtlMs, secure: publicUrl.startsWith('https:') });
  const sources: RowSources = {
    registry: deps.registry,
    routing: deps.routing,
    heartbeatMs: config.sessions.heartbeatIntervalMs,
    ...(deps.cluster ? { cluster: deps.cluster } : {}),
  };
  const seen = new Map<string, DirectoryNode>();
  let cached: { at: number; rows: FleetRow[] } | null = null;
  const rows = () => {
    const now = Date.now();
    if (!cached || now - cached.at >= ROWS_CACHE_MS) cached = { at: now, rows: fleetRows(directory.snapshot, sources, seen) };
    return cached.rows;
  };
  // Sessions opening and closing change rows at once; the cache must not hide that from the next batch.
  const invalidate = () => {
    cached = null;
  };
  const opened = (session: { nodeId: string; nodeName: string }) => {
    if (!directory.snapshot.byId.has(session.nodeId)) seen.set(session.nodeId, seenNode(session.nodeId, session.nodeName));
    invalidate();
  };
  const feed = new FleetFeed({
    rows,
    maxBufferedBytes: d.streamBufferBytes,
    onDrop: (reason) => metrics.dashboardStreamsDropped.inc({ reason }),
    onCount: (open) => metrics.dashboardStreams.set(open),
  });
  const exported = deps.heldElsewhere ? (r: { id: string }) => deps.registry.get(r.id) !== undefined || !deps.heldElsewhere!(r.id) : () => true;
  metrics.setFleetSource({
    nodes: () => rows().filter(exported).map((r) => ({ name: r.name, state: r.state, drifting: r.routing.drifting, unhealthy: r.services.unhealthy ?? 0 })),
    // Only this panel's own sessions: the panel that holds a node's session exports its routes.
    routes: () => freshRouteProbes(deps.registry.list()),
  });
  return {
    directory,
    tokens,
    cookies,
    signedOut,
    accepts: (claim) => claim.expiresAt * 1000 > Date.now() && tokens.valid(claim.tokenId) && !signedOut.has(claim.id),
    feed,
    sources,
    rows,
    start() {
      deps.registry.on('opened', opened);
      deps.registry.on('closed', invalidate);
      directory.start();
      tokens.start();
      signedOut.start();
    },
    async stop() {
      deps.registry.off('opened', opened);
      deps.registry.off('closed', invalidate);
      await feed.stop();
      // A read hanging on a database that does not answer must not hold the panel's shutdown beyond the page's deadline.
      const bound = new Promise<void>((resolve) => setTimeout(resolve, d.dbDeadlineMs).unref());
      await Promise.race([Promise.all([directory.stop(), tokens.stop(), signedOut.stop()]), bound]);
    },
  };
}
