import type { NodeAuthenticator } from './agent-gateway/authenticate.js';
import type { ConnectionCap } from './http/connection-cap.js';
import type { HeldKind } from './http/held-streams.js';
import type { PanelParts } from './panel-parts.js';
import type { PrimaryLocator } from './db/primary-locator.js';
import type { FailoverStatus } from './cluster/scheduler-failover.js';

// What can be observed of this panel's background parts, in one documented
// place (docs/architecture.md, "Panel status"): the session-fact outbox's
// queue, what tokens hold open, connections per address, watched
// deployments, node-token lookups, and this panel's ownership (lease and
// LISTEN). Read-only: tests and operators look here instead of reaching into
// the parts; what a test controls it passes in (AppDependencies). The
// outbox's queue is also a metric (tether_session_facts_pending); the
// per-address figure is here only (an unbounded label set).

export interface PanelStatus {
  /** Session facts not yet committed, and what the outbox replayed from a previous run's spill file. */
  readonly outbox: { readonly pending: number; readonly replayed: number; readonly spilled: number };
  /** Streams and waits held open by tokens (of one kind, or all). */
  heldStreams(kind?: HeldKind): number;
  /** Connections an address holds before authentication (the per-address cap). */
  connectionsHeldBy(address: string): number;
  /** Deployments whose waits or event streams are watched, and shared sweeps run since start. */
  readonly deploymentWatches: { readonly watched: number; readonly sweeps: number };
  /** Node-token checks that read the database (warm tokens are checked from memory). */
  readonly nodeTokenQueries: number;
  /**
   * The database server this panel writes to (db/primary-locator.ts): `server` (host:port, null while none
   * answers as a primary), its timeline, moves to another primary, old primaries refused, and the newest
   * timeline whose fencing check finished (cluster/timeline-fence.ts; 0 with one panel).
   */
  readonly database: { readonly server: string | null; readonly timeline: number; readonly failovers: number; readonly staleRefused: number; readonly fencedTimeline: number };
  /** Several panels: this panel's id, whether it holds its lease, whether another live panel was seen, whether LISTEN is up. */
  readonly ownership: { readonly panelId: string; readonly leaseHeld: boolean; readonly othersSeen: boolean; readonly listening: boolean } | undefined;
  /**
   * The scheduler (issue 36/38): whether this panel holds its lease (and the epoch), and failover as of its last
   * evaluation: the brake and its reason, nodes lost and unreachable, re-placements deferred and made.
   */
  readonly scheduler: { readonly leaseHeld: boolean; readonly epoch: number | null; readonly failover: FailoverStatus | null } | undefined;
}

export function panelStatus(parts: PanelParts, connections: ConnectionCap, nodeAuth: NodeAuthenticator, servers: PrimaryLocator | undefined): PanelStatus {
  const { outbox, held, changes, cluster } = parts;
  return {
    database: {
      get server() {
        const current = servers?.current;
        return current ? `${current.host}:${current.port}` : null;
      },
      get timeline() {
        return servers?.current?.timeline ?? 0;
      },
      get failovers() {
        return servers?.failovers ?? 0;
      },
      get staleRefused() {
        return servers?.staleRefused ?? 0;
      },
      get fencedTimeline() {
        return cluster?.fence.fencedTimeline ?? 0;
      },
    },
    outbox: {
      get pending() {
        return outbox.pending;
      },
      get replayed() {
        return outbox.stats.replayed;
      },
      get spilled() {
        return outbox.stats.spilled;
      },
    },
    heldStreams: (kind) => held.count(kind),
    connectionsHeldBy: (address) => connections.heldBy(address),
    deploymentWatches: {
      get watched() {
        return changes.watched;
      },
      get sweeps() {
        return changes.sweeps;
      },
    },
    get nodeTokenQueries() {
      return nodeAuth.queries;
    },
    scheduler: parts.scheduler && {
      get leaseHeld() {
        return parts.scheduler.lease.held !== null;
      },
      get epoch() {
        return parts.scheduler.lease.held?.epoch ?? null;
      },
      get failover() {
        return parts.scheduler.failover;
      },
    },
    ownership: cluster && {
      panelId: cluster.panelId,
      get leaseHeld() {
        return cluster.lease.held;
      },
      get othersSeen() {
        return cluster.lease.othersSeen;
      },
      get listening() {
        return cluster.signals.listening;
      },
    },
  };
}
