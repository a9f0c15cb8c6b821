import type { Logger } from '@tether/common';
import { routingHash, type Route } from '@tether/protocol';
import { readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';
import { matchesCanonicalJson } from './canonical-json.js';
import type { ProxyConfigurator, ProxySupervisor, ReloadRecord } from './configurator.js';
import { classifyReload } from './reload-kind.js';
import type { RoutingStateStore } from './routing-state.js';
import { STATIC_ID_PREFIX, renderStaticConfig, type StaticRenderOptions, type StaticRendered } from './static-render.js';

// Caddy's static config (docs/architecture.md, "Static proxy"), for the static routing controller: rendered
// once from settings only, written beside the state, and loaded only when Caddy does not hold its `@id` (start,
// a restarted or recreated Caddy, new settings, an older agent's per-route config). One `@id` read decides a
// check; a full compare reads the running config. Every load is recorded as a reload, with its kind.

export interface StaticConfigLoaderOptions {
  proxy: ProxyConfigurator;
  supervisor?: ProxySupervisor | undefined;
  render: StaticRenderOptions;
  configPath: string;
  onReload?: ((reload: ReloadRecord) => void) | undefined;
  logger: Logger;
  now: () => Date;
  /** The routing state (applied map, reload history). */
  store: () => Promise<RoutingStateStore>;
}

export class StaticConfigLoader {
  readonly adminCalls = { idReads: 0, configReads: 0, loads: 0 };
  /** The config itself decides it: a release that renders otherwise makes its one load a `change`, not drift. */
  readonly renderDigest: string;
  private rendered: StaticRendered | null = null;
  /** Caddy held `rendered.id` at the last check. */
  private configInPlace = false;

  constructor(private readonly o: StaticConfigLoaderOptions) {
    this.renderDigest = `static-${renderStaticConfig(o.render).id.slice(STATIC_ID_PREFIX.length, STATIC_ID_PREFIX.length + 24)}`;
  }

  /**
   * Loads the static config when Caddy does not hold it; true when it loaded.
   * `applied` is the map this load serves (recorded with the reload), if any.
   */
  async ensure(full: boolean, applied?: { hash: string; routes: Route[] }): Promise<boolean> {
    await this.o.supervisor?.ensure();
    const created = this.o.supervisor?.takeCreated?.() ?? false;
    const rendered = (this.rendered ??= renderStaticConfig(this.o.render));
    if (!full && !created && this.configInPlace) {
      this.adminCalls.idReads += 1;
      if (await this.o.proxy.hasObject(rendered.id).catch(() => false)) return false;
    }
    const onDisk = await readFileIfExists(this.o.configPath);
    if (onDisk === null || !onDisk.equals(rendered.file)) await writeFileAtomic(this.o.configPath, rendered.file);
    this.adminCalls.configReads += 1;
    const running = await this.o.proxy.readRunning();
    if (matchesCanonicalJson(running, rendered.json)) {
      this.configInPlace = true;
      return false;
    }
    const store = await this.o.store();
    const { kind, reason } = classifyReload({ running, created, appliedHash: store.appliedHash, appliedDigest: store.renderDigest, digest: this.renderDigest });
    const startedAt = this.o.now();
    this.adminCalls.loads += 1;
    this.configInPlace = false;
    await this.o.proxy.load(rendered.json);
    this.configInPlace = true;
    const at = this.o.now();
    const hash = applied?.hash ?? store.appliedHash ?? routingHash([]);
    const routes = applied?.routes ?? [...store.appliedRoutes];
    const hashBefore = store.appliedHash;
    await store.recordReload(hash, routes, reason, kind, this.renderDigest, at);
    this.o.logger.info({ kind, reason }, 'proxy loaded the static config');
    try {
      this.o.onReload?.({ kind, reason, startedAt, at, hashBefore, hashAfter: hash });
    } catch (error) {
      this.o.logger.error({ err: error }, 'reload listener failed');
    }
    return true;
  }
}
