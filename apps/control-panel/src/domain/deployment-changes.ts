import { createLoop, type Loop, type Logger } from '@tether/common';
import type { Db } from '../db/database.js';
import type { Deployment } from '../generated/prisma/client.js';

// Which watched deployments changed, pushed rather than polled. Every write of
// a `deployments` row, by any panel of any version, NOTIFYs its id (a trigger,
// migration 20261202040100): the panel's LISTEN connection hears its own
// writes and the others' alike, and wakes only the watchers of that id, which
// then read their row once. An idle watcher costs no query. NOTIFY is lost
// while LISTEN is down, so a reconnect wakes every watcher (`rescan`), and one
// shared sweep (a single query for every watched id) runs every
// TETHER_DEPLOYMENT_SWEEP_MS for anything missed, and every
// TETHER_DEPLOYMENT_WATCH_MS while LISTEN is down or absent (one panel without
// a database URL for signals).

/** What a watcher compares: a change in any of these is an event. */
export const fingerprint = (d: Pick<Deployment, 'status' | 'reason' | 'sessionId' | 'ackedAt' | 'finishedAt' | 'drainEndedAt'>) =>
  `${d.status}|${d.reason ?? ''}|${d.sessionId ?? ''}|${d.ackedAt?.getTime() ?? ''}|${d.finishedAt?.getTime() ?? ''}|${d.drainEndedAt?.getTime() ?? ''}`;

export interface DeploymentChangesOptions {
  /** The shared sweep while signals are heard. */
  sweepMs: number;
  /** The shared sweep while they are not (LISTEN down or absent). */
  pollMs: number;
  logger: Logger;
  /** Whether signals are heard now (several panels: the LISTEN connection); absent: never (one panel polls). */
  listening?: () => boolean;
}

export class DeploymentChanges {
  private readonly waiting = new Map<string, Set<() => void>>();
  /** The fingerprint each watched id was last read with. */
  private readonly known = new Map<string, string>();
  private readonly loop: Loop;
  private lastSweep = 0;
  sweeps = 0;

  constructor(
    private readonly prisma: Db,
    private readonly options: DeploymentChangesOptions,
  ) {
    this.loop = createLoop({
      name: 'deployment-sweep',
      intervalMs: Math.min(options.pollMs, options.sweepMs),
      run: () => this.maybeSweep(),
      onError: (err) => options.logger.warn({ err }, 'deployment sweep failed'),
    });
  }

  start(): void {
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    this.wakeAll();
  }

  /** The watcher of `id` read it with this fingerprint. */
  seen(id: string, print: string): void {
    if (this.waiting.has(id)) this.known.set(id, print);
  }

  /**
   * The next change of `id` (signalled, swept, a rescan): `wait` resolves then, or when `signal` aborts, or
   * on `cancel` (a watcher that ends without waiting must cancel, or the id stays watched).
   */
  next(id: string, signal?: AbortSignal): { wait: Promise<void>; cancel(): void } {
    let wake: () => void = () => undefined;
    const wait = new Promise<void>((resolve) => {
      let set = this.waiting.get(id);
      if (!set) this.waiting.set(id, (set = new Set()));
      wake = () => {
        signal?.removeEventListener('abort', wake);
        const current = this.waiting.get(id);
        current?.delete(wake);
        if (current?.size === 0) {
          this.waiting.delete(id);
          this.known.delete(id);
        }
        resolve();
      };
      set.add(wake);
      if (signal?.aborted) return wake();
      signal?.addEventListener('abort', wake, { once: true });
    });
    return { wait, cancel: () => wake() };
  }

  /** Rows written (by this panel or another): their watchers read again. */
  changed(ids: readonly string[]): void {
    for (const id of ids) this.wake(id);
  }

  /** Signals may have been lost (LISTEN reconnected): every watcher reads again. */
  rescan(): void {
    this.wakeAll();
  }

  get watched(): number {
    return this.waiting.size;
  }

  private wake(id: string): void {
    const set = this.waiting.get(id);
    if (set) for (const wake of [...set]) wake();
  }

  private wakeAll(): void {
    for (const id of [...this.waiting.keys()]) this.wake(id);
  }

  private async maybeSweep(): Promise<void> {
    if (this.waiting.size === 0) return;
    const now = Date.now();
    if (this.options.listening?.() && now - this.lastSweep < this.options.sweepMs) return;
    this.lastSweep = now;
    this.sweeps++;
    const ids = [...this.waiting.keys()];
    const rows = await this.prisma.deployment.findMany({
      where: { id: { in: ids } },
      select: { id: true, status: true, reason: true, sessionId: true, ackedAt: true, finishedAt: true, drainEndedAt: true },
    });
    const found = new Map(rows.map((r) => [r.id, fingerprint(r)]));
    for (const id of ids) if (found.get(id) !== this.known.get(id)) this.wake(id);
  }
}
