import { TickBatcher } from '@tether/common';
import type { HelloFence } from '@tether/protocol';
import { sqlOf, type Db } from '../db/database.js';
import { workloadOf, type PlannedWorkload, type ServiceSpec } from '../db/deployment-spec.js';
import { withDeadline } from '../db/db-faults.js';
import type { AllocationDrainReport } from '../db/managed-drains.js';
import { homeDeploymentsSql } from '../db/where-services-run.js';
import { AppError } from '../errors.js';
import type { DeploymentTerminal } from './facts.js';
import type { SessionFactOutbox } from './outbox.js';

// Everything the session layer writes to PostgreSQL, behind one interface so the
// heartbeat path can be shown to write nothing. Writes happen when something
// changes (session opened or closed, deployment state), and last-seen times
// are flushed in batches. Every write is a fact for the one ordered writer
// (session-writes/outbox.ts): session opens and closes never wait for the
// database (an outage holds them, in order, until it answers).
export interface SessionOpenedRecord {
  nodeId: string;
  sessionId: string;
  at: Date;
  /** The generation the session's claim took (several panels): fences the node row. */
  generation?: number;
  /** The capabilities the session agreed (hello ∩ this panel's): written to nodes.capabilities with the open. */
  capabilities?: string[];
  /** The private address the session announced under routing.remote (null: none): nodes.private_address. */
  privateAddress?: string | null;
  /** hello.challengePort under certificates.share (null: none): nodes.challenge_port. */
  challengePort?: number | null;
  /** hello.fence under workload.fence (null: none): nodes.fence_after_ms and fence_stop_timeout_ms. */
  fence?: HelloFence | null;
}

export interface SessionClosedRecord {
  nodeId: string;
  sessionId: string;
  code: number;
  reason: string;
  at: Date;
  lastFrameAt: Date;
  /** Superseded by a newer session of the same node: the node stays reachable. */
  superseded: boolean;
  generation?: number;
}

export type { DeploymentTerminal };

/** What an agent's deploy.drained says, and which node said it. */
export interface DrainReport {
  deploymentId: string;
  nodeId: string;
  connectionsOpenAtSwitch: number | null;
  connectionsCut: number | null;
  drainEndedAt: string;
}

export interface SessionStore {
  /** Resolve when committed; never reject for an unavailable database (the outbox holds them). */
  sessionOpened(record: SessionOpenedRecord): Promise<void>;
  sessionClosed(record: SessionClosedRecord): Promise<void>;
  flushLastSeen(entries: { nodeId: string; at: Date }[]): Promise<void>;
  /**
   * Deployment transitions are awaited by a REST answer: they reject with
   * DATABASE_UNAVAILABLE when not committed within the commit deadline, and stay
   * queued (the row reaches its state once the database answers).
   */
  deploymentDispatched(deploymentId: string, sessionId: string, reportsDrain?: boolean): Promise<void>;
  deploymentDelivered(deploymentId: string): Promise<void>;
  /** Ends a deployment (and, when it runs, supersedes the service's older running one). */
  /** `imageRef`: the image the agent ran, pinned (deploy.result running). */
  deploymentFinished(deploymentId: string, status: DeploymentTerminal, reason: string, nodeId?: string, imageRef?: string): Promise<boolean>;
  /**
   * Records the node's deploy.drained on its deployment: true when it was the first for it (repeats and
   * another node's deployment change nothing). Not awaited by a REST answer: the outbox holds it through an outage.
   */
  deploymentDrained(report: DrainReport): Promise<boolean>;
  /**
   * Records a node's allocations.drained (one rollout's drain of a managed deployment): true when recorded (a report
   * naming an allocation already reported for the deployment changes nothing). The outbox holds it through an outage.
   */
  allocationDrained(report: AllocationDrainReport): Promise<boolean>;
  /** Deployment ids of a node that were delivered but have no result yet. */
  deliveredDeployments(nodeId: string): Promise<string[]>;
  /** What the node should run: every service placed on it with its current deployment. */
  desiredWorkloads(nodeId: string): Promise<DesiredWorkloads>;
}

/** A node's desired set as read from the database. */
export interface DesiredWorkloads {
  /** Each service placed on the node with a delivered or running deployment made for it there: the newest. */
  workloads: PlannedWorkload[];
  /** Every service placed on the node when it was read, deployed or not. */
  placed: string[];
}

/**
 * How long a read made by a session open waits for other opens to share its query, when another batch went
 * out less than this ago (TickBatcher's lingerMs): a storm's opens arrive one every few ms, and a query each
 * was most of an open's cost. A lone open after a quiet spell is not delayed.
 */
export const OPEN_READ_LINGER_MS = 20;

export class OutboxSessionStore implements SessionStore {
  // Reads a session open makes, shared by every open of one turn of the loop: a reconnect storm opens
  // hundreds of sessions at once, and a query each was most of an open's cost.
  private readonly delivered = new TickBatcher<string, string[]>((nodeIds) => this.loadDelivered(nodeIds), 500, 2, OPEN_READ_LINGER_MS);
  private readonly workloads = new TickBatcher<string, DesiredWorkloads>((nodeIds) => this.loadWorkloads(nodeIds), 500, 2, OPEN_READ_LINGER_MS);

  constructor(
    private readonly prisma: Db,
    private readonly outbox: SessionFactOutbox,
    /** How long a REST answer waits for a deployment transition to commit. */
    private readonly commitWaitMs: number,
  ) {}

  async sessionOpened(r: SessionOpenedRecord): Promise<void> {
    await this.outbox.submit({
      kind: 'session.opened',
      nodeId: r.nodeId,
      sessionId: r.sessionId,
      at: r.at.toISOString(),
      ...(r.generation === undefined ? {} : { generation: r.generation }),
      ...(r.capabilities === undefined ? {} : { capabilities: r.capabilities }),
      ...(r.privateAddress === undefined ? {} : { privateAddress: r.privateAddress }),
      ...(r.challengePort === undefined ? {} : { challengePort: r.challengePort }),
      ...(r.fence === undefined ? {} : { fence: r.fence }),
    });
  }

  async sessionClosed(r: SessionClosedRecord): Promise<void> {
    await this.outbox.submit({
      kind: 'session.closed',
      nodeId: r.nodeId,
      sessionId: r.sessionId,
      code: r.code,
      reason: r.reason,
      at: r.at.toISOString(),
      lastFrameAt: r.lastFrameAt.toISOString(),
      superseded: r.superseded,
      ...(r.generation === undefined ? {} : { generation: r.generation }),
    });
  }

  async flushLastSeen(entries: { nodeId: string; at: Date }[]): Promise<void> {
    for (const e of entries) this.outbox.noteLastSeen(e.nodeId, e.at);
  }

  async deploymentDispatched(deploymentId: string, sessionId: string, reportsDrain = false): Promise<void> {
    await this.committed(this.outbox.submit({ kind: 'deployment.dispatched', deploymentId, sessionId, at: new Date().toISOString(), reportsDrain }));
  }

  async deploymentDelivered(deploymentId: string): Promise<void> {
    await this.committed(this.outbox.submit({ kind: 'deployment.delivered', deploymentId, at: new Date().toISOString() }));
  }

  async deploymentFinished(deploymentId: string, status: DeploymentTerminal, reason: string, nodeId?: string, imageRef?: string): Promise<boolean> {
    const fact = { kind: 'deployment.finished', deploymentId, status, reason, at: new Date().toISOString(), nodeId: nodeId ?? null, ...(imageRef ? { imageRef } : {}) } as const;
    return (await this.committed(this.outbox.submit(fact))) === true;
  }

  async deploymentDrained(report: DrainReport): Promise<boolean> {
    return (await this.outbox.submit({ kind: 'deployment.drained', ...report })) === true;
  }

  async allocationDrained(report: AllocationDrainReport): Promise<boolean> {
    return (await this.outbox.submit({ kind: 'allocation.drained', ...report })) === true;
  }

  private async committed<T>(write: Promise<T>): Promise<T> {
    try {
      return await withDeadline(write, this.commitWaitMs, 'the database');
    } catch {
      throw new AppError(
        'DATABASE_UNAVAILABLE',
        'the database did not record this in time; the record is queued and is written once the database answers',
      );
    }
  }

  async deliveredDeployments(nodeId: string): Promise<string[]> {
    return (await this.delivered.load(nodeId)) ?? [];
  }

  async desiredWorkloads(nodeId: string): Promise<DesiredWorkloads> {
    return (await this.workloads.load(nodeId)) ?? { workloads: [], placed: [] };
  }

  private async loadDelivered(nodeIds: string[]): Promise<Map<string, string[]>> {
    const rows = await sqlOf(this.prisma).rows<{ id: string; node_id: string }>(
      `SELECT id, node_id FROM deployments WHERE node_id = ANY($1::text[]) AND status = 'delivered' ORDER BY created_at, id`,
      [nodeIds],
    );
    const byNode = new Map<string, string[]>();
    for (const r of rows) byNode.set(r.node_id, [...(byNode.get(r.node_id) ?? []), r.id]);
    return byNode;
  }

  private async loadWorkloads(nodeIds: string[]): Promise<Map<string, DesiredWorkloads>> {
    // Per service homed on these nodes, its newest deployment made for its home (a service moved here runs once it
    // is deployed here) that was delivered or runs (db/where-services-run.ts: what an unmanaged service runs there);
    // a service without one comes with nulls. Every service homed here, managed or not: a session whose agent speaks
    // allocations is never sent this set, and one that stopped speaking them must not lose its services meanwhile.
    const rows = await sqlOf(this.prisma).rows<{ service_id: string; name: string; node_id: string; deployment_id: string | null; spec: ServiceSpec | null }>(
      `SELECT s.id AS service_id, s.name, s.node_id, d.id AS deployment_id, d.spec
      FROM services s LEFT JOIN LATERAL (
        SELECT d.id, d.spec FROM ${homeDeploymentsSql('s')}
        ORDER BY d.created_at DESC, d.id DESC LIMIT 1
      ) d ON true
      WHERE s.node_id = ANY($1::text[])
      ORDER BY s.id`,
      [nodeIds],
    );
    const byNode = new Map<string, DesiredWorkloads>();
    for (const row of rows) {
      let desired = byNode.get(row.node_id);
      if (!desired) byNode.set(row.node_id, (desired = { workloads: [], placed: [] }));
      desired.placed.push(row.service_id);
      const spec = row.spec;
      if (row.deployment_id === null || spec === null) continue;
      // The name is the service's now (a rename after the deploy).
      desired.workloads.push(workloadOf(row.service_id, row.deployment_id, { ...spec, name: row.name }));
    }
    return byNode;
  }
}
