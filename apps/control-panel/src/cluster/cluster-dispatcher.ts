import type { Logger } from '@tether/common';
import { sqlOf, type Db } from '../db/database.js';
import type { ServiceSpec } from '../db/deployment-spec.js';
import { workloadOf } from '../domain/deployments.js';
import { AppError } from '../errors.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { DeploymentDispatcher, DispatchOutcome, DispatchRequest } from '../dispatch/session-dispatcher.js';
import type { SessionStore } from '../session-writes/session-store.js';
import type { PanelLease } from './panel-lease.js';
import type { PanelSignals } from './panel-signals.js';

// Deploys across panels. A deployment for a node whose session this panel
// holds goes out locally. One whose node another live panel owns: that panel
// is found and signalled in one statement (NOTIFY, the deployment id), sends
// it on its session, waits for the ACK and records the outcome, then signals
// back; this panel answers from the row: 202 delivered, 504 ACK_TIMEOUT, 503
// NODE_UNREACHABLE, as for a local session (a signal that says `delivered`
// needs no read: the row has committed at least that far). No answer within the ACK timeout
// + 2 s (the owner died): the row is settled `unreachable` where still
// pending. No owner: 503 at once.

/** Beyond the ACK timeout, how long the asking panel waits for the owner's answer. */
export const REMOTE_GRACE_MS = 2_000;

/**
 * The owner's answer to `deploy`: `deployed:owner:id/delivered,id` when its send was ACKed and recorded,
 * `deployed:owner:id` otherwise (read the row). The bare id is for panels of the previous version, which
 * know no outcome (they ignore the entry with one): drop it once none is left.
 */
export const DELIVERED = 'delivered';

/** The owner's answer awaited: its outcome ('' when it named none), false when the wait ran out. */
interface Waiting {
  answered: Promise<string | false>;
  cancel(): void;
}

/** What deployment signals drive (cluster.ts routes them here). */
export interface DeploySignals {
  /** A deployment another panel asked this one to send (its owner). */
  requested(deploymentId: string): void;
  /** A deployment this panel asked another to send reached its next state (`outcome`: as the owner's signal says it). */
  answered(deploymentId: string, outcome?: string): void;
  /** LISTEN (re)connected: deployments of owned nodes that may have been signalled meanwhile. */
  rescan(): Promise<void>;
}

export class ClusterDispatcher implements DeploymentDispatcher, DeploySignals {
  private readonly waiters = new Map<string, (outcome: string) => void>();
  /** Deployments this panel is sending for another (a signal and a rescan may ask for the same one at once). */
  private readonly sending = new Set<string>();

  constructor(
    private readonly deps: {
      local: DeploymentDispatcher;
      registry: SessionRegistry;
      lease: PanelLease;
      signals: PanelSignals;
      prisma: Db;
      store: SessionStore;
      ackTimeoutMs: number;
      logger: Logger;
    },
  ) {}

  async dispatch(request: DispatchRequest): Promise<DispatchOutcome> {
    const { lease, registry } = this.deps;
    if (!lease.mayServe) {
      const reason = `panel ${lease.panelId} does not hold its lease on the database; deploy through another panel`;
      await this.deps.store.deploymentFinished(request.deploymentId, 'unreachable', reason);
      throw new AppError('PANEL_LEASE_LOST', reason, { nodeId: request.nodeId, deploymentId: request.deploymentId });
    }
    if (registry.get(request.nodeId)) return this.deps.local.dispatch(request);
    // Waiting before the owner is signalled: its answer can come before the statement's result does.
    const waiting = this.wait(request.deploymentId);
    let owner: string | undefined;
    try {
      owner = await this.deps.signals.askOwner(request.nodeId, request.deploymentId);
    } catch (err) {
      waiting.cancel();
      throw err;
    }
    // No other live owner: the local dispatcher ends it `unreachable` at once.
    if (!owner) {
      waiting.cancel();
      return this.deps.local.dispatch(request);
    }
    return this.remote(request, owner, waiting);
  }

  private wait(deploymentId: string): Waiting {
    let timer: NodeJS.Timeout | undefined;
    const answered = new Promise<string | false>((resolve) => {
      this.waiters.set(deploymentId, (outcome) => resolve(outcome));
      timer = setTimeout(() => resolve(false), this.deps.ackTimeoutMs + REMOTE_GRACE_MS);
    });
    const cancel = () => {
      clearTimeout(timer);
      this.waiters.delete(deploymentId);
    };
    return { answered, cancel };
  }

  private async remote(request: DispatchRequest, owner: string, waiting: Waiting): Promise<DispatchOutcome> {
    const waitMs = this.deps.ackTimeoutMs + REMOTE_GRACE_MS;
    try {
      const got = await waiting.answered;
      if (got === DELIVERED) return { httpStatus: 202 };
      if (got === false) {
        const reason = `node ${request.nodeName}'s panel ${owner} did not answer within ${waitMs} ms (ACK timeout + ${REMOTE_GRACE_MS} ms); the node is unreachable until it rejoins`;
        const changed = await this.deps.prisma.deployment.updateMany({
          where: { id: request.deploymentId, status: 'pending' },
          data: { status: 'unreachable', reason, finishedAt: new Date() },
        });
        if (changed.count > 0) throw new AppError('NODE_UNREACHABLE', reason, { nodeId: request.nodeId, deploymentId: request.deploymentId });
      }
    } finally {
      waiting.cancel();
    }
    const row = await this.deps.prisma.deployment.findUnique({ where: { id: request.deploymentId }, select: { status: true, reason: true } });
    const details = { nodeId: request.nodeId, deploymentId: request.deploymentId, panelId: owner };
    switch (row?.status) {
      case 'ack_timeout':
        throw new AppError('ACK_TIMEOUT', row.reason ?? undefined, details);
      case 'unreachable':
        throw new AppError('NODE_UNREACHABLE', row.reason ?? undefined, details);
      case 'failed':
        // The owner refused to send it: its agent lacks a capability (the reason says so). Any other failure came
        // from the agent after delivery (a fast deploy.result): the dispatch itself succeeded.
        if (row.reason?.startsWith('AGENT_LACKS_CAPABILITY:')) throw new AppError('AGENT_LACKS_CAPABILITY', row.reason, details);
        return { httpStatus: 202 };
      case 'pending':
        // The owner answered without moving the row (its database write is still queued): the owner ends it.
        throw new AppError('DATABASE_UNAVAILABLE', `panel ${owner} has not recorded the deployment's outcome yet`, details);
      default:
        return { httpStatus: 202 };
    }
  }

  /** The owner answered a deployment this panel asked it to send (`outcome`: what its signal said, if anything). */
  answered(deploymentId: string, outcome = ''): void {
    this.waiters.get(deploymentId)?.(outcome);
  }

  /** Another panel asks this one, the node's owner, to send a pending deployment; answers when its row moved. */
  async requested(deploymentId: string): Promise<void> {
    // Already being sent: that send answers (two reads of a pending row must not send the deploy twice).
    if (this.sending.has(deploymentId)) return;
    this.sending.add(deploymentId);
    let answer = [deploymentId];
    try {
      // One statement with the node's name (the relation through Prisma is a second round trip on the deploy's path).
      const [row] = await sqlOf(this.deps.prisma).rows<{ id: string; service_id: string; node_id: string; spec: ServiceSpec; name: string }>(
        `SELECT d.id, d.service_id, d.node_id, d.spec, n.name FROM deployments d JOIN nodes n ON n.id = d.node_id
        WHERE d.id = $1 AND d.status = 'pending' AND d.dispatched_at IS NULL`,
        [deploymentId],
      );
      if (!row) return;
      const workload = workloadOf(row.service_id, row.id, row.spec);
      const sent = await this.deps.local.dispatch({ deploymentId: row.id, nodeId: row.node_id, nodeName: row.name, workload }).then(
        (outcome) => outcome.httpStatus === 202,
        (err: unknown) => {
          if (!(err instanceof AppError)) this.deps.logger.error({ err, deploymentId }, 'dispatch for another panel failed');
          return false;
        },
      );
      // The outcome first: a panel that knows it answers from it; the bare id after it resolves nothing more there.
      if (sent) answer = [`${deploymentId}/${DELIVERED}`, deploymentId];
    } catch (err) {
      this.deps.logger.warn({ err, deploymentId }, 'could not dispatch for another panel');
    } finally {
      this.sending.delete(deploymentId);
      await this.deps.signals.send('deployed', this.deps.lease.panelId, answer);
    }
  }

  /** After LISTEN reconnected: pending deployments of nodes this panel holds that another panel may have signalled. */
  async rescan(): Promise<void> {
    const nodeIds = this.deps.registry.list().map((s) => s.nodeId);
    if (nodeIds.length === 0) return;
    const rows = await this.deps.prisma.deployment.findMany({
      where: { nodeId: { in: nodeIds }, status: 'pending', dispatchedAt: null, createdAt: { gt: new Date(Date.now() - this.deps.ackTimeoutMs - REMOTE_GRACE_MS) } },
      select: { id: true },
    });
    for (const r of rows) void this.requested(r.id);
  }
}
