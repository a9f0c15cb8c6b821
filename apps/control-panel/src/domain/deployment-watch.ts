import type { Deployment } from '../generated/prisma/client.js';
import type { DeploymentStatus } from '../generated/prisma/enums.js';
import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import { teamScope, type AuthContext } from './access.js';
import type { presentDeployment } from './deployments.js';
import { setTimeout as delay } from 'node:timers/promises';

// Watching a deployment until it is final. The row is the truth (whichever
// panel received the agent's deploy.result wrote it), so a watcher polls the
// row at a configurable interval (TETHER_DEPLOYMENT_WATCH_MS) and reports each
// change. Polling one indexed row a few times a second per watcher is cheap,
// and it stays right when several panels share the database.

/** States a deployment does not leave on its own (`running` can still turn `failed` later; waiting ends at `running`). */
export const FINAL_STATUSES: ReadonlySet<DeploymentStatus> = new Set<DeploymentStatus>(['running', 'failed', 'superseded', 'unreachable', 'ack_timeout']);

export const isFinal = (status: DeploymentStatus) => FINAL_STATUSES.has(status);

export type PresentedDeployment = ReturnType<typeof presentDeployment>;

export interface WatchOptions {
  /** How often the row is read while waiting. */
  pollMs: number;
  /** Stops the watch (the client left). */
  signal?: AbortSignal;
}

/** Reads a deployment the caller may see, or throws NOT_FOUND (another team's deployment is not found, never forbidden). */
export async function visibleDeployment(prisma: Db, auth: AuthContext, id: string): Promise<Deployment> {
  const row = await prisma.deployment.findFirst({ where: { id, service: teamScope(auth) } });
  if (!row) throw new AppError('NOT_FOUND', 'no such deployment');
  return row;
}

/** What a watcher compares: a change in any of these is an event. */
const fingerprint = (d: Deployment) => `${d.status}|${d.reason ?? ''}|${d.sessionId ?? ''}|${d.ackedAt?.getTime() ?? ''}|${d.finishedAt?.getTime() ?? ''}`;

/**
 * Yields the deployment as it is now, then each time it changes, and returns
 * after yielding a final state, when the row disappears (its service was
 * deleted: yields nothing more) or when the signal aborts.
 */
export async function* watchDeployment(prisma: Db, first: Deployment, options: WatchOptions): AsyncGenerator<Deployment> {
  let last = fingerprint(first);
  yield first;
  if (isFinal(first.status)) return;
  while (!options.signal?.aborted) {
    await delay(options.pollMs, undefined, { signal: options.signal }).catch(() => undefined);
    if (options.signal?.aborted) return;
    const row = await prisma.deployment.findUnique({ where: { id: first.id } });
    if (!row) return;
    const now = fingerprint(row);
    if (now === last) continue;
    last = now;
    yield row;
    if (isFinal(row.status)) return;
  }
}

/** Waits up to `waitMs` for the deployment to be final, or until `stop` aborts; returns the row as it is then (final or not). */
export async function waitUntilFinal(prisma: Db, first: Deployment, waitMs: number, pollMs: number, stop?: AbortSignal): Promise<Deployment> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), waitMs);
  const stopped = () => controller.abort();
  stop?.addEventListener('abort', stopped, { once: true });
  if (stop?.aborted) controller.abort();
  let current = first;
  try {
    for await (const row of watchDeployment(prisma, first, { pollMs: Math.min(pollMs, Math.max(1, waitMs)), signal: controller.signal })) current = row;
  } finally {
    clearTimeout(timer);
    stop?.removeEventListener('abort', stopped);
  }
  return current;
}
