import { listen } from '@tether/common';
import { CLOSE_CODES } from '@tether/protocol';
import { healthOf, locatorOf, type Db } from '../db/database.js';
import type { PrimaryLocator } from '../db/primary-locator.js';
import { AppError } from '../errors.js';
import type { PanelEvents } from '../panel-events.js';
import type { FrameRouter } from '../sessions/frame-router.js';
import type { SessionGenerations } from '../sessions/generations.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { AgentSession } from '../sessions/session.js';
import type { SessionFactOutbox } from '../session-writes/outbox.js';
import { withDeadline } from '../db/db-faults.js';
import type { ClusterView } from '../sessions/remote-report.js';
import type { DeploymentDispatcher } from '../dispatch/session-dispatcher.js';
import type { SessionStore } from '../session-writes/session-store.js';
import { ClaimBatch } from './claim-batch.js';
import { ClusterDispatcher, type DeploySignals } from './cluster-dispatcher.js';
import { ExpiredOwnerSweep } from './expired-owners.js';
import { PeerView } from './peer-view.js';
import { NodeReportWriter, readReports, type RemoteReport } from './node-reports.js';
import { OwnerLogs } from './owner-logs.js';
import { OwnerReports } from './owner-reports.js';
import { PanelLease, type PanelLeaseOptions } from './panel-lease.js';
import { PeerClient } from './peer-client.js';
import { PANEL_AUTH_SCHEME, PanelSecret, PeerVerifier } from './peer-credentials.js';
import { PanelSignals } from './panel-signals.js';
import { SignalRelay } from './signal-relay.js';
import { TimelineFence } from './timeline-fence.js';

// Several panels on one PostgreSQL (issue 10). This panel's lease, its claims
// on the nodes whose sessions it holds (one statement, before `welcome`), the
// signals between panels (LISTEN/NOTIFY, ids only), the per-node reports every
// panel reads, and the sweep that closes sessions of panels whose lease
// expired. The gateway calls `claim`; everything else is wired in `start`.

/** The lease's settings, plus what the cluster wires together. */
export interface ClusterOptions extends Omit<PanelLeaseOptions, 'servers'> {
  /** The database (one or several servers) the lease and LISTEN connect to. */
  databaseUrl: string;
  prisma: Db;
  registry: SessionRegistry;
  /** Every frame of this panel's sessions (each one refreshes the node's report). */
  frames: FrameRouter;
  events: PanelEvents;
  outbox: SessionFactOutbox;
  /** Where the generation each session of this panel claimed is kept (the registry reads it). */
  generations: SessionGenerations;
  /** Bound on asking another panel (connect and answer headers; a live report's whole answer). */
  peerTimeoutMs: number;
  /** What the cross-panel dispatcher sends through when this panel holds the session, and where it records. */
  dispatch: { local: DeploymentDispatcher; store: SessionStore; ackTimeoutMs: number };
  /** The scheduler epoch this panel holds (0: none), raised into the fencing floor on a new timeline (issue 36). */
  schedulerEpoch?: () => number;
}

export class PanelCluster {
  readonly lease: PanelLease;
  /** Which database server this panel writes to (db/primary-locator.ts). */
  readonly servers: PrimaryLocator;
  /** Fencing across a database promotion (timeline-fence.ts). */
  readonly fence: TimelineFence;
  /** Checks other panels' credentials on this panel's internal surface. */
  readonly verifier: PeerVerifier & { scheme: string };
  private readonly peers: PeerClient;
  private readonly owners: OwnerReports;
  /** Log streams of nodes another panel holds, asked of that panel. */
  readonly logs: OwnerLogs;
  readonly signals: PanelSignals;
  readonly reports: NodeReportWriter;
  private readonly generations: SessionGenerations;
  /** What other live panels hold, read at each renewal. */
  private readonly peerView: PeerView;
  private readonly expiredOwners: ExpiredOwnerSweep;
  /** Deploys across panels; deployment signals drive it. */
  readonly dispatcher: ClusterDispatcher;
  private readonly deploys: DeploySignals;
  private readonly off: (() => void)[] = [];
  private readonly claims: ClaimBatch;
  private readonly relay: SignalRelay;

  constructor(private readonly options: ClusterOptions) {
    const { prisma, databaseUrl, panelId, logger } = options;
    this.generations = options.generations;
    // A secret per run, its hash with the lease row: other panels check it there (peer-credentials.ts).
    const secret = new PanelSecret(panelId);
    // The lease and LISTEN follow the server the pool writes to (several hosts in DATABASE_URL, issue 39).
    const servers = locatorOf(prisma, databaseUrl, options.connectTimeoutMs);
    this.servers = servers;
    this.lease = new PanelLease({ ...options, servers, secretHash: secret.hash });
    this.claims = new ClaimBatch(prisma, panelId);
    this.fence = new TimelineFence({
      prisma,
      panelId,
      generations: this.generations,
      registry: options.registry,
      claims: this.claims,
      logger,
      ...(options.schedulerEpoch ? { schedulerEpoch: options.schedulerEpoch } : {}),
    });
    servers.onChange = ({ timeline }) => this.fence.reached(timeline);
    if (servers.current) this.fence.reached(servers.current.timeline);
    this.verifier = Object.assign(new PeerVerifier(prisma), { scheme: PANEL_AUTH_SCHEME });
    this.peers = new PeerClient(secret, options.peerTimeoutMs);
    this.owners = new OwnerReports(this.peers, panelId, logger);
    this.logs = new OwnerLogs(prisma, panelId, this.peers);
    this.signals = new PanelSignals({ servers, prisma, connectTimeoutMs: options.connectTimeoutMs, queryTimeoutMs: options.queryTimeoutMs, logger, panelId });
    this.reports = new NodeReportWriter({
      prisma,
      panelId,
      flushMs: 1_000,
      refreshMs: 10_000,
      othersLive: () => this.peerView.othersLive,
      generationOf: (sessionId) => this.generations.get(sessionId),
      logger,
    });
    this.peerView = new PeerView(prisma, panelId, logger);
    this.expiredOwners = new ExpiredOwnerSweep(prisma, options.outbox, logger);
    this.dispatcher = new ClusterDispatcher({ ...options.dispatch, registry: options.registry, lease: this.lease, signals: this.signals, prisma, logger });
    this.deploys = this.dispatcher;
    this.relay = new SignalRelay({ ...options, signals: this.signals, deploys: this.deploys });
  }

  get panelId(): string {
    return this.options.panelId;
  }

  heldElsewhere(nodeId: string): boolean {
    return this.peerView.heldElsewhere(nodeId);
  }

  /** The node's live session on another panel, as of this panel's last renewal (the fleet page's rows). */
  connectedElsewhere(nodeId: string): RemoteReport | undefined {
    return this.peerView.connectedElsewhere(nodeId);
  }

  generationOf(sessionId: string): number | undefined {
    return this.generations.get(sessionId);
  }

  /**
   * Claims the node for a session of this panel: one statement (shared by the claims of one loop turn,
   * claim-batch.ts), which succeeds only while this panel's lease is live by PostgreSQL's clock, takes the
   * next generation and tells every panel (the older owner closes its session).
   */
  async claim(nodeId: string, sessionId: string): Promise<number> {
    if (!this.lease.held) throw new AppError('PANEL_LEASE_LOST', `panel ${this.panelId} does not hold its lease; it claims no session until it does`);
    // After a promotion, not before this panel's share of the fencing floor is written (timeline-fence.ts).
    await this.fence.settled();
    const generation = await this.claims.claim(nodeId, sessionId);
    if (generation === undefined) {
      throw new AppError('PANEL_LEASE_LOST', `panel ${this.panelId}'s claim refused: lease expired by the database's clock, or a newer session of the node claimed it`);
    }
    this.generations.set(sessionId, generation);
    return generation;
  }

  /**
   * What status answers need: this panel's lease, and other panels' reports of these nodes (none if the
   * database cannot say), each live one as its owner answers now (owner-reports.ts); `containers`: status
   * reads need them, session health does not.
   */
  async view(nodeIds: readonly string[], options: { containers?: boolean } = {}): Promise<ClusterView> {
    let remote: ReadonlyMap<string, RemoteReport> = new Map();
    // A database known down is not asked (no full deadline per read): other panels' nodes read unknown.
    if (nodeIds.length > 0 && !healthOf(this.options.prisma).knownDown) {
      try {
        remote = await withDeadline(readReports(this.options.prisma, nodeIds), this.options.queryTimeoutMs, 'the database');
      } catch (err) {
        this.options.logger.warn({ err }, 'other panels\' reports unavailable: their nodes read unknown');
      }
    }
    if (remote.size > 0) remote = await this.owners.overlay(remote, options.containers === true);
    return { panelId: this.panelId, leaseHeld: this.lease.mayServe, remote };
  }

  /** Starts LISTEN, the sweep, and the report writer's listeners (the lease is started before, on its own). */
  async start(): Promise<void> {
    const { registry, logger } = this.options;
    this.off.push(
      listen(registry, 'opened', (s: AgentSession) => this.reports.observe(s, 'connected')),
      this.options.frames.observe((s) => this.reports.observe(s, 'connected')),
      listen(registry, 'closed', (s: AgentSession) => {
        this.reports.observe(s, 'closed');
        this.generations.delete(s.id);
      }),
      this.relay.start(),
      listen(this.lease, 'renewed', () => this.renewed()),
      listen(this.lease, 'lost', ({ othersSeen }: { othersSeen: boolean }) => {
        // With another live panel, this one's agents can move there; alone, keeping the sessions keeps liveness.
        if (!othersSeen) {
          logger.warn({ panelId: this.panelId }, 'lease lost but no other live panel was seen: sessions kept');
          return;
        }
        for (const s of registry.list()) s.teardown(CLOSE_CODES.GOING_AWAY, `panel ${this.panelId} lost its lease; reconnect to another panel`);
      }),
    );
    this.signals.start();
    // The lease started before (its own component: it is given up after the outbox drains); its first renewal
    // had no listener yet.
    if (this.lease.held) this.renewed();
  }

  /** Stops what `start` began; the lease is the panel-lease component's (app.ts). */
  async stop(): Promise<void> {
    this.off.splice(0).forEach((f) => f());
    await this.reports.stop().catch(() => {});
    await this.signals.stop();
    await this.peers.close();
  }

  private renewed(): void {
    void this.expiredOwners.sweep();
    void this.peerView.refresh();
    // Panels whose lease ended drop out of the internal surface's credentials.
    this.verifier.refresh().catch((err: unknown) => this.options.logger.warn({ err }, 'could not read other panels\' credentials'));
  }
}
