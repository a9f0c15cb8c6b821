import { createLoop, type Logger, type Loop } from '@tether/common';
import { canonicalRoutes, routingHash, type Route } from '@tether/protocol';
import type { ProxyTraffic, RoutingApplyResult, RoutingController, RoutingMapInput } from '../controllers.js';
import type { CaddyAdmin } from './caddy-admin.js';
import { caddyTraffic } from './proxy-traffic.js';
import { fileStamp, readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';
import { matchesCanonicalJson } from './canonical-json.js';
import type { ProxyConfigurator } from './configurator.js';
import { ProxyError } from './errors.js';
import { renderCaddyConfig, renderDigest, type RenderOptions, type RenderedConfig } from './render.js';
import { classifyReload } from './reload-kind.js';
import { RoutingLane } from './routing-lane.js';
import type { RoutingStateStore, ReloadKind } from './routing-state.js';

// Incident 2: the panel pushes the whole map every 5 minutes and the old agent
// reloaded Caddy on every push, 418 times a day, and each reload closed every
// WebSocket on the host. The rule here: compare before acting. The rendered
// config is compared with the file last written and with what Caddy runs;
// only a difference leads to a write (file) or a load (Caddy), and only a load
// counts as a reload.
//
// The no-op decision costs the same at 200 and 10,000 routes: when the map's
// hash is the one in place, the file is the one last written (stat, not
// read) and Caddy holds the config's `@id` (GET /id/<id>, one small read), the
// push is a no-op. Anything else falls back to the full compare, and every
// fullCheckIntervalMs the periodic check does the full compare anyway, which
// repairs hand edits that kept the id.

/** Keeps the proxy process itself alive (container mode); the controller then repairs its config. */
export interface ProxySupervisor {
  /** Creates or starts the proxy when it is missing or stopped, and waits until its admin API answers. */
  ensure(): Promise<void>;
  /** True once after ensure() created a new proxy: its first load is `initial`, not a repair. */
  takeCreated?(): boolean;
}

/** A reload the controller made, whatever asked for it (a pushed map or the periodic check). */
export interface ReloadRecord {
  kind: ReloadKind;
  reason: string;
  /** When the load was sent; Caddy closes proxied connections between this and `at`. */
  startedAt: Date;
  /** When Caddy answered the load. */
  at: Date;
  hashBefore: string | null;
  hashAfter: string;
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
  /**
   * How often the periodic check compares the whole running config instead of
   * only its `@id` (a hand edit elsewhere keeps the id). Default 10 minutes.
   */
  fullCheckIntervalMs?: number;
  supervisor?: ProxySupervisor;
  /** Caddy's upstreams in use (a drain's count: only per service alias in this mode, proxy-traffic.ts). */
  upstreams?: Pick<CaddyAdmin, 'upstreams'>;
  /** Told of every reload, after it is counted (event journal, canary attribution). */
  onReload?: (reload: ReloadRecord) => void;
  logger: Logger;
  /** Clock for reload times and the UTC day of reloadsToday. */
  now?: () => Date;
}

export class CaddyRoutingController extends RoutingLane implements RoutingController {
  /** The last map the panel sent: what a repair restores (it may differ from what is in place after a failed load). */
  private desired: { routes: Route[]; hash: string } | null = null;
  private rendered: RenderedConfig | null = null;
  /** The config file as last written or verified: a stat equal to it means nobody touched the file. */
  private fileStamp: { hash: string; stamp: string } | null = null;
  private lastFullCompareAt = Number.NEGATIVE_INFINITY;
  private readonly renderDigest: string;
  /** How long the last apply took to verify the map's hash, then to decide and act (bench, logs). */
  lastApplyMs = { verify: 0, decide: 0 };
  /** Admin calls by kind since start (tests, bench): a no-op push makes exactly one `idReads`. */
  readonly adminCalls = { idReads: 0, configReads: 0, loads: 0 };
  private readonly loop: Loop | null;
  private closed: Promise<void> | null = null;
  /** Every container sits behind the service alias: a drain can count only the service's total. */
  readonly traffic: ProxyTraffic | undefined;

  constructor(private readonly options: CaddyRoutingControllerOptions) {
    super(options, options.now ?? (() => new Date()));
    this.traffic = options.upstreams ? caddyTraffic({ admin: options.upstreams, counting: 'service' }) : undefined;
    this.renderDigest = renderDigest(options.render);
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
      await this.idle();
      await this.options.proxy.close();
    })();
    return this.closed;
  }

  /** Never rejects and never waits past the admin timeout: every failure is a coded `error` in the result. */
  apply(map: RoutingMapInput): Promise<RoutingApplyResult> {
    return this.serialize(async () => {
      try {
        // A push may arrive before the first check brought the proxy up, or after it died.
        await this.options.supervisor?.ensure();
        // Verifying the claimed hash (canonical order + sha256 of every route) is linear in the map, like
        // decoding the frame; everything after it is the no-op decision, measured in bench/routing-agent.ts.
        const started = performance.now();
        const ordered = canonicalRoutes(map.routes);
        const hash = routingHash(ordered);
        const verified = performance.now();
        this.lastApplyMs = { verify: verified - started, decide: 0 };
        if (hash !== map.hash) {
          return this.answer(map.hash, false, false, new ProxyError('PROXY_HASH_MISMATCH', `map hash ${map.hash} is not the hash of its routes (${hash})`));
        }
        const result = await this.reconcile(ordered, hash, false);
        this.lastApplyMs.decide = performance.now() - verified;
        return result;
      } catch (error) {
        return this.answer(map.hash, false, false, error);
      }
    });
  }

  /**
   * One check: the proxy process runs, and serves the routes the panel last
   * sent (or those in place). Usually one `@id` read; a full compare every
   * fullCheckIntervalMs, or with `full`.
   */
  async check(options: { full?: boolean } = {}): Promise<void> {
    await this.options.supervisor?.ensure();
    const store = await this.ready();
    const desired = this.desired ?? (store.appliedHash === null ? null : { routes: [...store.appliedRoutes], hash: store.appliedHash });
    // Nothing known yet: the panel's first push configures the proxy.
    if (desired === null) return;
    const full = options.full === true || Date.now() - this.lastFullCompareAt >= (this.options.fullCheckIntervalMs ?? 600_000);
    const result = await this.serialize(() => this.reconcile(desired.routes, desired.hash, full));
    if (result.error) throw new Error(result.error);
  }

  /** `ordered` in canonical order with routingHash `hash` (the caller verified it). */
  private async reconcile(ordered: Route[], hash: string, full: boolean): Promise<RoutingApplyResult> {
    const store = await this.ready();
    const answer = this.answer.bind(this);
    const created = this.options.supervisor?.takeCreated?.() ?? false;
    if (!full && !created && (await this.inPlace(store, hash))) {
      this.desired = { routes: ordered, hash };
      return answer(hash, false, false, null);
    }
    let rendered: RenderedConfig;
    try {
      rendered = this.rendered?.hash === hash ? this.rendered : renderCaddyConfig(ordered, this.options.render);
    } catch (error) {
      return answer(hash, false, false, error);
    }
    this.rendered = rendered;
    this.desired = { routes: ordered, hash };

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
      const stamp = await fileStamp(this.options.configPath);
      this.fileStamp = stamp === null ? null : { hash, stamp };
    } catch (error) {
      // Serving customers matters more than our copy on disk: report it, still bring Caddy in line.
      fileError = new ProxyError('PROXY_WRITE_FAILED', `config file ${this.options.configPath}: ${(error as Error).message}`, { cause: error });
    }

    let running: string;
    try {
      this.adminCalls.configReads += 1;
      running = await this.options.proxy.readRunning();
    } catch (error) {
      return answer(hash, wrote, false, error);
    }
    this.lastFullCompareAt = Date.now();
    if (matchesCanonicalJson(running, rendered.json)) {
      try {
        await store.markApplied(hash, ordered, this.renderDigest);
      } catch (error) {
        fileError ??= error;
      }
      return answer(hash, wrote, false, fileError);
    }

    const { kind, reason } = classifyReload({
      appliedRoutes: store.appliedRoutes,
      appliedHash: store.appliedHash,
      appliedDigest: store.renderDigest,
      digest: this.renderDigest,
      after: ordered,
      running,
      created,
    });
    const hashBefore = store.appliedHash;
    const startedAt = this.now();
    try {
      this.adminCalls.loads += 1;
      await this.options.proxy.load(rendered.json);
    } catch (error) {
      if (!(await this.loadedAnyway(error, rendered))) {
        this.options.logger.warn({ err: error, hash }, 'proxy load failed; the previous config keeps running');
        return answer(hash, true, false, error);
      }
    }
    const at = this.now();
    try {
      await store.recordReload(hash, ordered, reason, kind, this.renderDigest, at);
    } catch (error) {
      fileError ??= error;
    }
    this.options.logger.info({ hash, kind, reason, reloadsToday: store.status().reloadsToday }, 'proxy reloaded');
    try {
      this.options.onReload?.({ kind, reason, startedAt, at, hashBefore, hashAfter: hash });
    } catch (error) {
      this.options.logger.error({ err: error }, 'reload listener failed');
    }
    return answer(hash, true, true, fileError);
  }

  /**
   * Whether the proxy serves `hash` already, decided in constant time: the hash
   * in place, the config file untouched since it was last written or verified,
   * and Caddy holding the config's `@id`.
   */
  private async inPlace(store: RoutingStateStore, hash: string): Promise<boolean> {
    if (store.appliedHash !== hash || store.renderDigest !== this.renderDigest || this.fileStamp?.hash !== hash) return false;
    // Set together with fileStamp by the full compare, so it is the render of `hash`.
    const rendered = this.rendered;
    if (rendered?.hash !== hash) return false;
    if ((await fileStamp(this.options.configPath)) !== this.fileStamp.stamp) return false;
    try {
      this.adminCalls.idReads += 1;
      return await this.options.proxy.hasObject(rendered.id);
    } catch {
      // The full compare reports the admin API's failure with its code.
      return false;
    }
  }

  /** A load whose answer was lost (timeout, dropped connection) may still have happened; ask Caddy. */
  private async loadedAnyway(error: unknown, rendered: RenderedConfig): Promise<boolean> {
    const code = (error as { code?: string }).code;
    if (code !== 'PROXY_TIMEOUT' && code !== 'PROXY_UNREACHABLE') return false;
    try {
      this.adminCalls.configReads += 1;
      return matchesCanonicalJson(await this.options.proxy.readRunning(), rendered.json);
    } catch {
      return false;
    }
  }
}
