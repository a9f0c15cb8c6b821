import type { EventEmitter } from 'node:events';
import { CLOSE_CODES } from '@tether/protocol';
import { healthOf, sqlOf, type Db } from '../db/database.js';
import { AppError } from '../errors.js';
import type { PanelEvents } from '../panel-events.js';
import type { FrameRouter } from '../sessions/frame-router.js';
import type { SessionGenerations } from '../sessions/generations.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { AgentSession } from '../sessions/session.js';
import { EXPIRED_OWNER_REASON } from '../session-writes/facts.js';
import type { SessionFactOutbox } from '../session-writes/outbox.js';
import { withDeadline } from '../db/db-faults.js';
import type { ClusterView } from '../sessions/service-status.js';
import { ClaimBatch } from './claim-batch.js';
import { NodeReportWriter, readReports, readReportsChanged, type RemoteReport } from './node-reports.js';
import { OwnerLogs } from './owner-logs.js';
import { OwnerReports } from './owner-reports.js';
import { PanelLease, type PanelLeaseOptions } from './panel-lease.js';
import { PeerClient } from './peer-client.js';
import { PANEL_AUTH_SCHEME, PanelSecret, PeerVerifier } from './peer-credentials.js';
import { PanelSignals, type Signal } from './panel-signals.js';

// Several panels on one PostgreSQL (issue 10). This panel's lease, its claims
// on the nodes whose sessions it holds (one statement, before `welcome`), the
// signals between panels (LISTEN/NOTIFY, ids only), the per-node reports every
// panel reads, and the sweep that closes sessions of panels whose lease
// expired. The gateway calls `claim`; everything else is wired in `start`.

/** The lease's settings, plus what the cluster wires together. */
export interface ClusterOptions extends PanelLeaseOptions {
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
}

/** What deployment signals drive: the cross-panel dispatcher (cluster-dispatcher.ts). */
export interface DeploySignals {
  /** A deployment another panel asked this one to send (its owner). */
  requested(deploymentId: string): void;
  /** A deployment this panel asked another to send reached its next state (`outcome`: as the owner's signal says it). */
  answered(deploymentId: string, outcome?: string): void;
  /** LISTEN (re)connected: deployments of owned nodes that may have been signalled meanwhile. */
  rescan(): Promise<void>;
}

export class PanelCluster {
  readonly lease: PanelLease;
  /** Checks other panels' credentials on this panel's internal surface. */
  readonly verifier: PeerVerifier & { scheme: string };
  private readonly peers: PeerClient;
  private readonly owners: OwnerReports;
  /** Log streams of nodes another panel holds, asked of that panel. */
  readonly logs: OwnerLogs;
  readonly signals: PanelSignals;
  readonly reports: NodeReportWriter;
  private readonly generations: SessionGenerations;
  /** Where deployment signals go (the cross-panel dispatcher, made after the cluster: deployTo). */
  private deploys: DeploySignals | null = null;
  private sweeping = false;
  /** Nodes whose session another live panel holds, as of this panel's last renewal (per-node metrics are theirs). */
  private elsewhere: ReadonlySet<string> = new Set();
  /** Every report row read so far (incrementally, at each renewal) and the panels live then: for the fleet page. */
  private readonly reportsSeen = new Map<string, RemoteReport>();
  private reportsReadAt: Date | null = null;
  private livePanels: ReadonlySet<string> = new Set();
  /** Another panel's lease was live at this panel's last renewal. */
  private othersLive = false;
  private readonly off: (() => void)[] = [];
  private readonly claims: ClaimBatch;

  constructor(private readonly options: ClusterOptions) {
    const { prisma, databaseUrl, panelId, logger } = options;
    this.generations = options.generations;
    // A secret per run, its hash with the lease row: other panels check it there (peer-credentials.ts).
    const secret = new PanelSecret(panelId);
    this.lease = new PanelLease({ ...options, secretHash: secret.hash });
    this.claims = new ClaimBatch(prisma, panelId);
    this.verifier = Object.assign(new PeerVerifier(prisma), { scheme: PANEL_AUTH_SCHEME });
    this.peers = new PeerClient(secret, options.peerTimeoutMs);
    this.owners = new OwnerReports(this.peers, panelId, logger);
    this.logs = new OwnerLogs(prisma, panelId, this.peers);
    this.signals = new PanelSignals({ databaseUrl, prisma, connectTimeoutMs: options.connectTimeoutMs, queryTimeoutMs: options.queryTimeoutMs, logger, panelId });
    this.reports = new NodeReportWriter({
      prisma,
      panelId,
      flushMs: 1_000,
      refreshMs: 10_000,
      othersLive: () => this.othersLive,
      generationOf: (sessionId) => this.generations.get(sessionId),
      logger,
    });
  }

  get panelId(): string {
    return this.options.panelId;
  }

  heldElsewhere(nodeId: string): boolean {
    return this.elsewhere.has(nodeId);
  }

  /** The node's live session on another panel, as of this panel's last renewal (the fleet page's rows). */
  connectedElsewhere(nodeId: string): RemoteReport | undefined {
    const r = this.reportsSeen.get(nodeId);
    return r && r.state === 'connected' && r.panelId !== this.panelId && this.livePanels.has(r.panelId) ? r : undefined;
  }

  /** Deployment signals go to `target` from now on (set once, before start). */
  deployTo(target: DeploySignals): void {
    this.deploys = target;
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

  /** Starts the lease (first renewal awaited), LISTEN, the sweep, and the report writer's listeners. */
  async start(): Promise<void> {
    const { registry, events, logger } = this.options;
    // Typed emitters of several kinds: each listener's arguments are spelled out where it is added.
    const on = <T extends unknown[]>(emitter: object, event: string, listener: (...a: T) => void) => {
      const target = emitter as EventEmitter;
      const l = listener as (...a: unknown[]) => void;
      target.on(event, l);
      this.off.push(() => target.off(event, l));
    };
    on(registry, 'opened', (s: AgentSession) => this.reports.observe(s, 'connected'));
    this.off.push(this.options.frames.observe((s) => this.reports.observe(s, 'connected')));
    on(registry, 'closed', (s: AgentSession) => {
      this.reports.observe(s, 'closed');
      this.generations.delete(s.id);
    });
    on(this.signals, 'signal', (signal: Signal) => this.received(signal));
    on(this.signals, 'connected', () => void this.rescan());
    on(this.lease, 'renewed', () => {
      void this.sweep();
      void this.refreshElsewhere();
      // Panels whose lease ended drop out of the internal surface's credentials.
      this.verifier.refresh().catch((err: unknown) => logger.warn({ err }, 'could not read other panels\' credentials'));
    });
    on(this.lease, 'lost', ({ othersSeen }: { othersSeen: boolean }) => {
      // With another live panel, this one's agents can move there; alone, keeping the sessions keeps liveness.
      if (!othersSeen) {
        logger.warn({ panelId: this.panelId }, 'lease lost but no other live panel was seen: sessions kept');
        return;
      }
      for (const s of registry.list()) s.teardown(CLOSE_CODES.GOING_AWAY, `panel ${this.panelId} lost its lease; reconnect to another panel`);
    });
    // REST changes committed here reach the owner wherever it is (a signal to self is ignored on receipt).
    on(events, 'routing.changed', (e: { nodeIds: string[]; remote?: boolean }) => {
      const ids = e.nodeIds.filter((id) => !registry.get(id));
      if (!e.remote && ids.length > 0) void this.signals.send('routing', this.panelId, ids);
    });
    on(events, 'workloads.changed', (e: { nodeId: string; remote?: boolean }) => {
      if (!e.remote && !registry.get(e.nodeId)) void this.signals.send('workloads', this.panelId, [e.nodeId]);
    });
    on(events, 'token.revoked', (e: { tokenId: string; remote?: boolean }) => {
      if (!e.remote) void this.signals.send('revoked', this.panelId, [e.tokenId]);
    });
    on(events, 'cookie.signed-out', (e: { cookieId: string; expiresAtMs: number; remote?: boolean }) => {
      if (!e.remote) void this.signals.send('signed-out', this.panelId, [`${e.cookieId}/${e.expiresAtMs}`]);
    });
    this.signals.start();
    await this.lease.start();
  }

  async stop(): Promise<void> {
    this.off.splice(0).forEach((f) => f());
    await this.reports.stop().catch(() => {});
    await this.signals.stop();
    await this.lease.stop();
    await this.peers.close();
  }

  private received(signal: Signal): void {
    const { registry, events } = this.options;
    switch (signal.kind) {
      case 'owner':
        for (const entry of signal.ids) {
          const [nodeId, gen] = entry.split('/');
          const generation = Number(gen);
          if (nodeId && Number.isFinite(generation)) this.supersedeIfOlder(nodeId, generation, signal.panel);
        }
        break;
      case 'deploy':
        if (signal.panel === this.panelId) for (const id of signal.ids) this.deploys?.requested(id);
        break;
      case 'deployed':
        for (const entry of signal.ids) {
          const [id, outcome] = entry.split('/');
          if (id) this.deploys?.answered(id, outcome);
        }
        break;
      case 'routing': {
        if (signal.panel === this.panelId) break;
        const nodeIds = signal.ids.filter((id) => registry.get(id));
        if (nodeIds.length > 0) events.emit('routing.changed', { nodeIds, reason: `changed on panel ${signal.panel}`, remote: true });
        break;
      }
      case 'revoked':
        if (signal.panel === this.panelId) break;
        for (const tokenId of signal.ids) events.emit('token.revoked', { tokenId, remote: true });
        break;
      case 'signed-out':
        if (signal.panel === this.panelId) break;
        for (const entry of signal.ids) {
          const [cookieId, at] = entry.split('/');
          if (cookieId && Number.isFinite(Number(at))) events.emit('cookie.signed-out', { cookieId, expiresAtMs: Number(at), remote: true });
        }
        break;
      case 'workloads':
        if (signal.panel === this.panelId) break;
        for (const nodeId of signal.ids) if (registry.get(nodeId)) events.emit('workloads.changed', { nodeId, reason: `changed on panel ${signal.panel}`, remote: true });
        break;
      default:
        break;
    }
  }

  private supersedeIfOlder(nodeId: string, generation: number, panel: string): void {
    const session = this.options.registry.get(nodeId);
    if (!session) return;
    const mine = this.generations.get(session.id);
    if (mine !== undefined && mine < generation) {
      session.teardown(CLOSE_CODES.SUPERSEDED, `superseded by a newer session of the node on panel ${panel} (generation ${generation})`);
    }
  }

  /** After LISTEN (re)connects: signals sent meanwhile are lost, so ownership and pending work are read again. */
  private async rescan(): Promise<void> {
    const sessions = this.options.registry.list();
    try {
      if (sessions.length > 0) {
        const rows = await this.options.prisma.$queryRaw<{ node_id: string; generation: bigint; panel_id: string }[]>`
          SELECT node_id, generation, panel_id FROM node_owners WHERE node_id = ANY(${sessions.map((s) => s.nodeId)}::text[])`;
        for (const r of rows) this.supersedeIfOlder(r.node_id, Number(r.generation), r.panel_id);
        // Routing changes signalled while LISTEN was down: the owner pushes the full map (the agent ignores an identical one).
        const owned = this.options.registry.list().map((s) => s.nodeId);
        if (owned.length > 0) this.options.events.emit('routing.changed', { nodeIds: owned, reason: 'rescan after LISTEN reconnected', remote: true });
      }
      void this.deploys?.rescan().catch((err: unknown) => this.options.logger.warn({ err }, 'deployment rescan failed'));
    } catch (err) {
      this.options.logger.warn({ err }, 'rescan after LISTEN reconnect failed');
    }
  }

  private async refreshElsewhere(): Promise<void> {
    try {
      const sql = sqlOf(this.options.prisma);
      const live = await sql.rows<{ id: string }>(`SELECT id FROM panels WHERE lease_until > now()`);
      const livePanels = new Set(live.map((p) => p.id));
      // Alone, no node is held elsewhere and no row another panel wrote is live: nothing more to read. The
      // changed rows are then this panel's own (a storm writes 10,000 of them): reading them back cost
      // PostgreSQL 0.9 s per 10,000-agent storm for nothing. The read resumes from the same point once another
      // panel is live, so none of its rows is missed.
      this.othersLive = [...livePanels].some((id) => id !== this.panelId);
      if (this.othersLive) {
        const rows = await sql.rows<{ node_id: string }>(
          `SELECT w.node_id FROM node_owners w JOIN panels p ON p.id = w.panel_id WHERE p.lease_until > now() AND w.panel_id <> $1::text`,
          [this.panelId],
        );
        this.elsewhere = new Set(rows.map((r) => r.node_id));
        // Only rows written since the last read (their time by the database's clock).
        const { reports, readAt } = await readReportsChanged(this.options.prisma, this.reportsReadAt, this.panelId);
        for (const r of reports) this.reportsSeen.set(r.nodeId, r);
        this.reportsReadAt = readAt;
      } else {
        this.elsewhere = new Set();
      }
      this.livePanels = livePanels;
    } catch (err) {
      this.options.logger.warn({ err }, 'could not read which nodes other panels hold');
    }
  }

  /**
   * Closes, in the history, sessions whose owning panel's lease expired (killed,
   * partitioned): after a renewal, so this panel's own lease is certainly live.
   */
  private async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      // Cheap reads first: the close is written only when some expired owner left its session open. Two
      // statements, not one anti-join: right after a restart every owner row is the stopped run's (its lease
      // ended) and its closes are all written, and with stale statistics PostgreSQL planned the anti-join as a
      // scan of session_events per owner row: 1.3 s a sweep during a 10,000-agent storm (docs/benchmarks.md).
      const sql = sqlOf(this.options.prisma);
      const expired = await sql.rows<{ session_id: string }>(
        `SELECT w.session_id FROM node_owners w LEFT JOIN panels p ON p.id = w.panel_id
        WHERE p.lease_until IS NULL OR p.lease_until <= now()`,
      );
      if (expired.length === 0) return;
      const [closed] = await sql.rows<{ n: number }>(`SELECT count(*)::int AS n FROM session_events WHERE session_id = ANY($1::text[]) AND kind = 'closed'`, [
        expired.map((e) => e.session_id),
      ]);
      if ((closed?.n ?? 0) >= expired.length) return;
      await this.options.outbox.submit({ kind: 'sessions.orphaned', reason: EXPIRED_OWNER_REASON, before: new Date().toISOString(), expiredOwnersOnly: true });
    } catch (err) {
      this.options.logger.warn({ err }, 'sweep of expired owners failed');
    } finally {
      this.sweeping = false;
    }
  }
}
