import type { Deployment } from '../generated/prisma/client.js';
import type { DeploymentStatus } from '../generated/prisma/enums.js';
import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import { teamScope, type AuthContext } from './access.js';
import type { presentDeployment } from './deployments.js';
import { fingerprint, type DeploymentChanges } from './deployment-changes.js';
import { DEFAULT_DRAIN_SECONDS } from '../db/deployment-spec.js';

// Watching a deployment until it is final. The row is the truth (whichever
// panel received the agent's deploy.result wrote it), so a watcher reads it
// again each time DeploymentChanges says it may have changed (a NOTIFY of its
// id, a rescan, the shared sweep) and reports each change. Between changes a
// watcher costs no query (2,000 watchers polling every 250 ms held the pool).

/** States a deployment does not leave on its own (`running` can still turn `failed` later; waiting ends at `running`). */
export const FINAL_STATUSES: ReadonlySet<DeploymentStatus> = new Set<DeploymentStatus>(['running', 'failed', 'superseded', 'unreachable', 'ack_timeout']);

export const isFinal = (status: DeploymentStatus) => FINAL_STATUSES.has(status);

export type PresentedDeployment = ReturnType<typeof presentDeployment>;

export interface WatchOptions {
  /** When to read the row again. */
  changes: DeploymentChanges;
  /** Stops the watch (the client left). */
  signal?: AbortSignal;
  /**
   * Past `running`, go on until the drain is reported (a deployment whose agent reports it: `reportsDrain`), or
   * until `drainSeconds` + this many ms after it first ran (an agent that never reports: gone for good).
   */
  drainGraceMs?: number;
}

/** How long past a drain's own deadline an event stream waits for its report (the agent's stop grace is at most 600 s). */
export const DRAIN_REPORT_GRACE_MS = 660_000;

/** A deployment that ran, whose agent reports the drain, and whose drain is not reported yet. */
export const awaitsDrain = (d: Pick<Deployment, 'reportsDrain' | 'runningAt' | 'drainEndedAt'>) => d.reportsDrain && d.runningAt !== null && d.drainEndedAt === null;

/** When a watcher stops waiting for a drain report: `drainSeconds` (the default for older rows) plus the grace after it first ran. */
function drainDeadline(d: Deployment, graceMs: number): number {
  const seconds = (d.spec as { drainSeconds?: number } | null)?.drainSeconds ?? DEFAULT_DRAIN_SECONDS;
  return (d.runningAt?.getTime() ?? Date.now()) + seconds * 1000 + graceMs;
}

/** Reads a deployment the caller may see, or throws NOT_FOUND (another team's deployment is not found, never forbidden). */
export async function visibleDeployment(prisma: Db, auth: AuthContext, id: string): Promise<Deployment> {
  const row = await prisma.deployment.findFirst({ where: { id, service: teamScope(auth) } });
  if (!row) throw new AppError('NOT_FOUND', 'no such deployment');
  return row;
}


/**
 * Yields the deployment as it is now, then each time it changes, and returns
 * after yielding a final state (with `drainGraceMs`: once its drain is
 * reported too, or its wait for that ended), when the row disappears (its
 * service was deleted: yields nothing more) or when the signal aborts.
 */
export async function* watchDeployment(prisma: Db, first: Deployment, options: WatchOptions): AsyncGenerator<Deployment> {
  const graceMs = options.drainGraceMs;
  const done = (d: Deployment) => isFinal(d.status) && (graceMs === undefined || !awaitsDrain(d) || Date.now() + 10 >= drainDeadline(d, graceMs));
  let last = fingerprint(first);
  options.changes.seen(first.id, last);
  yield first;
  if (done(first)) return;
  let current = first;
  let next = options.changes.next(first.id, options.signal);
  try {
    while (!options.signal?.aborted) {
      // `next` was asked for before this read: a change committed after the read still wakes this watcher.
      const row = await prisma.deployment.findUnique({ where: { id: first.id } });
      if (!row) return;
      current = row;
      const now = fingerprint(row);
      options.changes.seen(first.id, now);
      if (now !== last) {
        last = now;
        yield row;
      }
      if (done(row)) return;
      await untilNextOrDeadline(next.wait, graceMs !== undefined && isFinal(current.status) ? drainDeadline(current, graceMs) : null);
      next = options.changes.next(first.id, options.signal);
    }
  } finally {
    next.cancel();
  }
}

/** The next change, or the drain deadline when one is set (then the row is read once more and the watch ends). */
async function untilNextOrDeadline(wait: Promise<void>, deadline: number | null): Promise<void> {
  if (deadline === null) return wait;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))));
  try {
    await Promise.race([wait, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Waits up to `waitMs` for the deployment to be final, or until `stop` aborts; returns the row as it is then (final or not). */
export async function waitUntilFinal(prisma: Db, first: Deployment, waitMs: number, changes: DeploymentChanges, stop?: AbortSignal): Promise<Deployment> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), waitMs);
  const stopped = () => controller.abort();
  stop?.addEventListener('abort', stopped, { once: true });
  if (stop?.aborted) controller.abort();
  let current = first;
  try {
    for await (const row of watchDeployment(prisma, first, { changes, signal: controller.signal })) current = row;
  } finally {
    clearTimeout(timer);
    stop?.removeEventListener('abort', stopped);
  }
  return current;
}
