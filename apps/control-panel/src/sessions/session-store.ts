import type { Workload } from '@tether/protocol';
import type { Db } from '../db/database.js';
import type { ServiceSpec } from '../db/deployment-spec.js';

// Everything the session layer writes to PostgreSQL, behind one interface so the
// heartbeat path can be shown to write nothing. Writes happen when something
// changes (session opened or closed, deployment state), and last-seen times
// are flushed in batches.

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

export type DeploymentTerminal = 'unreachable' | 'ack_timeout' | 'failed' | 'running';

export interface SessionStore {
  sessionOpened(record: SessionOpenedRecord): Promise<void>;
  sessionClosed(record: SessionClosedRecord): Promise<void>;
  flushLastSeen(entries: { nodeId: string; at: Date }[]): Promise<void>;
  deploymentDispatched(deploymentId: string, sessionId: string): Promise<void>;
  deploymentDelivered(deploymentId: string): Promise<void>;
  /** Ends a deployment (and, when it runs, supersedes the service's older running one). */
  deploymentFinished(deploymentId: string, status: DeploymentTerminal, reason: string, nodeId?: string): Promise<boolean>;
  /** Deployment ids of a node that were delivered but have no result yet. */
  deliveredDeployments(nodeId: string): Promise<string[]>;
  /** What the node should run: every service placed on it with its current deployment. */
  desiredWorkloads(nodeId: string): Promise<Workload[]>;
}

/** Statuses a deployment can still leave. */
const OPEN_STATUSES = ['pending', 'delivered'] as const;

export class PrismaSessionStore implements SessionStore {
  constructor(private readonly prisma: Db) {}

  async sessionOpened(r: SessionOpenedRecord): Promise<void> {
    // One statement instead of a transaction of two: a fleet reconnecting at once opens thousands of sessions.
    await this.prisma.$executeRaw`
      WITH opened AS (
        INSERT INTO session_events (node_id, session_id, kind, at) VALUES (${r.nodeId}, ${r.sessionId}, 'opened', ${r.at})
      )
      UPDATE nodes SET unreachable_since = NULL, last_seen_at = ${r.at} WHERE id = ${r.nodeId}`;
  }

  async sessionClosed(r: SessionClosedRecord): Promise<void> {
    await this.prisma.$transaction([
      this.prisma.sessionEvent.create({
        data: { nodeId: r.nodeId, sessionId: r.sessionId, kind: 'closed', reason: r.reason, closeCode: r.code, at: r.at },
      }),
      this.prisma.node.update({
        where: { id: r.nodeId },
        data: r.superseded
          ? { lastTeardownAt: r.at, lastTeardownReason: r.reason }
          : { lastTeardownAt: r.at, lastTeardownReason: r.reason, unreachableSince: r.at, lastSeenAt: r.lastFrameAt },
      }),
    ]);
  }

  async flushLastSeen(entries: { nodeId: string; at: Date }[]): Promise<void> {
    if (entries.length === 0) return;
    // One statement for the whole batch, however many sessions there are.
    const ids = entries.map((e) => e.nodeId);
    const times = entries.map((e) => e.at.toISOString());
    await this.prisma.$executeRaw`
      UPDATE nodes SET last_seen_at = v.at
      FROM unnest(${ids}::text[], ${times}::timestamptz[]) AS v(id, at)
      WHERE nodes.id = v.id AND (nodes.last_seen_at IS NULL OR nodes.last_seen_at < v.at)`;
  }

  async deploymentDispatched(deploymentId: string, sessionId: string): Promise<void> {
    await this.prisma.deployment.update({ where: { id: deploymentId }, data: { sessionId, dispatchedAt: new Date() } });
  }

  async deploymentDelivered(deploymentId: string): Promise<void> {
    await this.prisma.deployment.updateMany({
      where: { id: deploymentId, status: 'pending' },
      data: { status: 'delivered', ackedAt: new Date(), reason: 'acknowledged by the agent' },
    });
  }

  async deploymentFinished(deploymentId: string, status: DeploymentTerminal, reason: string, nodeId?: string): Promise<boolean> {
    const now = new Date();
    return this.prisma.$transaction(async (tx) => {
      // A running deployment can still fail later (its containers crashed past the agent's restart budget).
      const from = status === 'failed' ? [...OPEN_STATUSES, 'running' as const] : [...OPEN_STATUSES];
      const changed = await tx.deployment.updateMany({
        where: { id: deploymentId, status: { in: from }, ...(nodeId ? { nodeId } : {}) },
        data: { status, reason, finishedAt: now },
      });
      if (changed.count === 0) return false;
      if (status === 'running') {
        const row = await tx.deployment.findUniqueOrThrow({ where: { id: deploymentId }, select: { serviceId: true } });
        await tx.deployment.updateMany({
          where: { serviceId: row.serviceId, status: 'running', id: { not: deploymentId } },
          data: { status: 'superseded', reason: `replaced by deployment ${deploymentId}` },
        });
      }
      return true;
    });
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
