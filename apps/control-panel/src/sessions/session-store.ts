import type { Workload } from '@tether/protocol';
import type { Db } from '../db/database.js';
import type { ServiceSpec } from '../db/deployment-spec.js';
import { withDeadline } from '../db/db-faults.js';
import { AppError } from '../errors.js';
import type { DeploymentTerminal } from '../session-writes/facts.js';
import type { SessionFactOutbox } from '../session-writes/outbox.js';

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
}

export type { DeploymentTerminal };

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
  deploymentDispatched(deploymentId: string, sessionId: string): Promise<void>;
  deploymentDelivered(deploymentId: string): Promise<void>;
  /** Ends a deployment (and, when it runs, supersedes the service's older running one). */
  deploymentFinished(deploymentId: string, status: DeploymentTerminal, reason: string, nodeId?: string): Promise<boolean>;
  /** Deployment ids of a node that were delivered but have no result yet. */
  deliveredDeployments(nodeId: string): Promise<string[]>;
  /** What the node should run: every service placed on it with its current deployment. */
  desiredWorkloads(nodeId: string): Promise<Workload[]>;
}

export class OutboxSessionStore implements SessionStore {
  constructor(
    private readonly prisma: Db,
    private readonly outbox: SessionFactOutbox,
    /** How long a REST answer waits for a deployment transition to commit. */
    private readonly commitWaitMs: number,
  ) {}

  async sessionOpened(r: SessionOpenedRecord): Promise<void> {
    await this.outbox.submit({ kind: 'session.opened', nodeId: r.nodeId, sessionId: r.sessionId, at: r.at.toISOString() });
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
    });
  }

  async flushLastSeen(entries: { nodeId: string; at: Date }[]): Promise<void> {
    for (const e of entries) this.outbox.noteLastSeen(e.nodeId, e.at);
  }

  async deploymentDispatched(deploymentId: string, sessionId: string): Promise<void> {
    await this.committed(this.outbox.submit({ kind: 'deployment.dispatched', deploymentId, sessionId, at: new Date().toISOString() }));
  }

  async deploymentDelivered(deploymentId: string): Promise<void> {
    await this.committed(this.outbox.submit({ kind: 'deployment.delivered', deploymentId, at: new Date().toISOString() }));
  }

  async deploymentFinished(deploymentId: string, status: DeploymentTerminal, reason: string, nodeId?: string): Promise<boolean> {
    const fact = { kind: 'deployment.finished', deploymentId, status, reason, at: new Date().toISOString(), nodeId: nodeId ?? null } as const;
    return (await this.committed(this.outbox.submit(fact))) === true;
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
    const rows = await this.prisma.deployment.findMany({ where: { nodeId, status: 'delivered' }, select: { id: true } });
    return rows.map((r) => r.id);
  }

  async desiredWorkloads(nodeId: string): Promise<Workload[]> {
    const services = await this.prisma.service.findMany({
      where: { nodeId },
      orderBy: { id: 'asc' },
      select: {
        id: true,
        name: true,
        deployments: {
          // Only deployments made for this node: a service moved here runs once it is deployed here.
          where: { nodeId, status: { in: ['delivered', 'running'] } },
          orderBy: { createdAt: 'desc' },
          take: 1,
          select: { id: true, spec: true },
        },
      },
    });
    const workloads: Workload[] = [];
    for (const service of services) {
      const current = service.deployments[0];
      if (!current) continue;
      const spec = current.spec as unknown as ServiceSpec;
      workloads.push({
        serviceId: service.id,
        serviceName: service.name,
        deploymentId: current.id,
        image: spec.image,
        env: spec.env,
        port: spec.internalPort,
        replicas: spec.replicas,
      });
    }
    return workloads;
  }
}
