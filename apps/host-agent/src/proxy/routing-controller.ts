import { createLoop, KeyedSerialQueue, type Logger, type Loop } from '@tether/common';
import { canonicalRoutes, routingHash, type Route, type RoutingStatus } from '@tether/protocol';
import type { RoutingApplyResult, RoutingController, RoutingMapInput } from '../controllers.js';
import { readFileIfExists, writeFileAtomic } from './atomic-file.js';
import { matchesCanonicalJson } from './canonical-json.js';
import type { ProxyConfigurator } from './configurator.js';
import { ProxyError, describeProxyError } from './errors.js';
import { renderCaddyConfig, type RenderOptions, type RenderedConfig } from './render.js';
import { describeRouteChange } from './route-diff.js';
import { RoutingStateStore } from './routing-state.js';

// Incident 2: the panel pushes the whole map every 5 minutes and the old agent
// reloaded Caddy on every push, 418 times a day, and each reload closed every
// WebSocket on the host. The rule here: compare before acting. The rendered
// config is compared with the file last written and with what Caddy runs;
// only a difference leads to a write (file) or a load (Caddy), and only a load
// counts as a reload.

/** Keeps the proxy process itself alive (container mode); the controller then repairs its config. */
export interface ProxySupervisor {
  /** Creates or starts the proxy when it is missing or stopped, and waits until its admin API answers. */
  ensure(): Promise<void>;
}

export interface CaddyRoutingControllerOptions {
  proxy: ProxyConfigurator;
  render: RenderOptions;
  /** Where the rendered config is written (TETHER_CADDY_CONFIG_PATH). */
  configPath: string;
  /** Routes in place and reload counters (TETHER_STATE_DIR/routing-state.json). */
  statePath: string;
  /**
   * How often the proxy is checked against the routes in place and repaired
   * (a restarted Caddy runs an empty config). 0: only when a map arrives.
   */
  checkIntervalMs: number;
  supervisor?: ProxySupervisor;
  logger: Logger;
  /** Clock for reload times and the UTC day of reloadsToday. */
  now?: () => Date;
}

const EMPTY_STATUS: RoutingStatus = { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null };

/** A config without an HTTP app serves nothing: what Caddy holds after a restart with its bootstrap config. */
function servesNothing(runningText: string): boolean {
  try {
    const running = JSON.parse(runningText) as { apps?: { http?: unknown } } | null;
    return !running?.apps?.http;
  } catch {
    return false;
  }
}

export class CaddyRoutingController implements RoutingController {
  private storeReady: Promise<RoutingStateStore> | null = null;
  private store: RoutingStateStore | null = null;
  /** One lane (this host's proxy): a push and a repair check never interleave their compare and load. */
  private readonly queue = new KeyedSerialQueue<'proxy'>();
  /** The last map the panel sent: what a repair restores (it may differ from what is in place after a failed load). */
  private desired: Route[] | null = null;
  private rendered: RenderedConfig | null = null;
  private readonly loop: Loop | null;
  private readonly now: () => Date;
  private closed: Promise<void> | null = null;

  constructor(private readonly options: CaddyRoutingControllerOptions) {
    this.now = options.now ?? (() => new Date());
    this.loop =
      options.checkIntervalMs > 0
        ? createLoop({
            name: 'proxy-check',
            intervalMs: options.checkIntervalMs,
            runImmediately: true,
            run: () => this.check(),
            onError: (error) => options.logger.warn({ err: error }, 'proxy check failed; retrying next interval'),
          })
        : null;
  }

  async start(): Promise<void> {
    await this.ready();
    this.loop?.start();
  }

  /** Idempotent. Caddy is left running on purpose: an agent restart must not drop customers' connections. */
  stop(): Promise<void> {
    this.closed ??= (async () => {
      await this.loop?.stop();
      await this.queue.idle();
      await this.options.proxy.close();
    })();
    return this.closed;
  }

  status(): RoutingStatus {
    return this.store?.status() ?? EMPTY_STATUS;
  }

  /** Never rejects and never waits past the admin timeout: every failure is a coded `error` in the result. */
  apply(map: RoutingMapInput): Promise<RoutingApplyResult> {
    return this.serialize(async () => {
      try {
        // A push may arrive before the first check brought the proxy up, or after it died.
        await this.options.supervisor?.ensure();
        return await this.reconcile(map.routes, map.hash);
      } catch (error) {
        return this.answer(map.hash, false, false, error);
      }
    });
  }

  /** One check: the proxy process runs, and serves the routes the panel last sent (or those in place). */
  async check(): Promise<void> {
    await this.options.supervisor?.ensure();
    const store = await this.ready();
    const routes = this.desired ?? (store.appliedHash === null ? null : [...store.appliedRoutes]);
    // Nothing known yet: the panel's first push configures the proxy.
    if (routes === null) return;
    const result = await this.serialize(() => this.reconcile(routes, null));
    if (result.error) throw new Error(result.error);
  }

  private ready(): Promise<RoutingStateStore> {
    this.storeReady ??= RoutingStateStore.open(this.options.statePath, { now: this.now, logger: this.options.logger }).then(
      (store) => (this.store = store),
      (error: unknown) => {
        // An unreadable state folder (permissions) is retried on the next apply.
        this.storeReady = null;
        throw new ProxyError('PROXY_WRITE_FAILED', `routing state ${this.options.statePath}: ${(error as Error).message}`, { cause: error });
      },
    );
    return this.storeReady;
  }

  private serialize<T>(work: () => Promise<T>): Promise<T> {
    return this.queue.run('proxy', work);
  }

  private answer(hash: string, changed: boolean, reloaded: boolean, error: unknown): RoutingApplyResult {
    return { hash, changed, reloaded, error: error === null ? null : describeProxyError(error), routing: this.status() };
  }

  private async reconcile(routes: readonly Route[], claimedHash: string | null): Promise<RoutingApplyResult> {
    const store = await this.ready();
    const answer = this.answer.bind(this);
    const ordered = canonicalRoutes(routes);
    const hash = routingHash(ordered);
    if (claimedHash !== null && claimedHash !== hash) {
      return answer(claimedHash, false, false, new ProxyError('PROXY_HASH_MISMATCH', `map hash ${claimedHash} is not the hash of its routes (${hash})`));
    }
    let rendered: RenderedConfig;
    try {
      rendered = this.rendered?.hash === hash ? this.rendered : renderCaddyConfig(ordered, this.options.render);
    } catch (error) {
      return answer(hash, false, false, error);
    }
    this.rendered = rendered;
    this.desired = ordered;

    // The file and Caddy are compared independently: a deleted file is rewritten without touching Caddy,
    // a restarted Caddy is reloaded without rewriting an identical file.
    let fileError: unknown = null;
    let wrote = false;
    try {
      const onDisk = await readFileIfExists(this.options.configPath);
      if (onDisk === null || !onDisk.equals(rendered.file)) {
        await writeFileAtomic(this.options.configPath, rendered.file);
        wrote = true;
      }
    } catch (error) {
      // Serving customers matters more than our copy on disk: report it, still bring Caddy in line.
      fileError = new ProxyError('PROXY_WRITE_FAILED', `config file ${this.options.configPath}: ${(error as Error).message}`, { cause: error });
    }

    let running: string;
    try {
      running = await this.options.proxy.readRunning();
    } catch (error) {
      return answer(hash, wrote, false, error);
    }
    if (matchesCanonicalJson(running, rendered.json)) {
      try {
        await store.markApplied(hash, ordered);
      } catch (error) {
        fileError ??= error;
      }
      return answer(hash, wrote, false, fileError);
    }

    const reason = this.reasonFor(store, ordered, running);
    try {
      await this.options.proxy.load(rendered.json);
    } catch (error) {
      if (!(await this.loadedAnyway(error, rendered))) {
        this.options.logger.warn({ err: error, hash }, 'proxy load failed; the previous config keeps running');
        return answer(hash, true, false, error);
      }
    }
    try {
      await store.recordReload(hash, ordered, reason);
    } catch (error) {
      fileError ??= error;
    }
    this.options.logger.info({ hash, reason, reloadsToday: store.status().reloadsToday }, 'proxy reloaded');
    return answer(hash, true, true, fileError);
  }

  private reasonFor(store: RoutingStateStore, after: Route[], running: string): string {
    const diff = describeRouteChange(store.appliedRoutes, after);
    // Before the first apply an empty Caddy is expected, not something repaired.
    const repair =
      store.appliedHash === null
        ? null
        : servesNothing(running)
          ? 'repaired: proxy was running an empty config'
          : diff === null
            ? 'repaired: proxy config differed from the routes in place'
            : null;
    // The protocol carries at most 4096 characters of reason.
    return ([diff, repair].filter((p) => p !== null).join('; ') || 'first configuration (no routes)').slice(0, 4096);
  }

  /** A load whose answer was lost (timeout, dropped connection) may still have happened; ask Caddy. */
  private async loadedAnyway(error: unknown, rendered: RenderedConfig): Promise<boolean> {
    const code = (error as { code?: string }).code;
    if (code !== 'PROXY_TIMEOUT' && code !== 'PROXY_UNREACHABLE') return false;
    try {
      return matchesCanonicalJson(await this.options.proxy.readRunning(), rendered.json);
    } catch {
      return false;
    }
  }
}
