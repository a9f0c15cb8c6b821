import { KeyedSerialQueue, type Logger } from '@tether/common';
import type { RoutingStatus } from '@tether/protocol';
import type { RoutingApplyResult } from '../controllers.js';
import { ProxyError, describeProxyError } from './errors.js';
import { RoutingStateStore } from './routing-state.js';

// The routing controller's plumbing (static-routing-controller.ts): the
// routing state opened once and lazily (an unreadable state folder is retried
// on the next apply, not fatal at start), one lane for this host's proxy (a
// push and a repair check never interleave their compare and load), and the
// shape of an apply's answer.

const EMPTY_STATUS: RoutingStatus = { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null };

export abstract class RoutingLane {
  protected store: RoutingStateStore | null = null;
  private storeReady: Promise<RoutingStateStore> | null = null;
  private readonly queue = new KeyedSerialQueue<'proxy'>();

  protected constructor(
    private readonly state: { statePath: string; logger: Logger },
    protected readonly now: () => Date,
  ) {}

  status(): RoutingStatus {
    return this.store?.status() ?? EMPTY_STATUS;
  }

  protected ready(): Promise<RoutingStateStore> {
    const { statePath, logger } = this.state;
    this.storeReady ??= RoutingStateStore.open(statePath, { now: this.now, logger }).then(
      (store) => (this.store = store),
      (error: unknown) => {
        this.storeReady = null;
        throw new ProxyError('PROXY_WRITE_FAILED', `routing state ${statePath}: ${(error as Error).message}`, { cause: error });
      },
    );
    return this.storeReady;
  }

  protected serialize<T>(work: () => Promise<T>): Promise<T> {
    return this.queue.run('proxy', work);
  }

  /** Resolves once no push or check is queued or running (stop). */
  protected idle(): Promise<void> {
    return this.queue.idle();
  }

  protected answer(hash: string, changed: boolean, reloaded: boolean, error: unknown): RoutingApplyResult {
    return { hash, changed, reloaded, error: error === null ? null : describeProxyError(error), routing: this.status() };
  }
}
