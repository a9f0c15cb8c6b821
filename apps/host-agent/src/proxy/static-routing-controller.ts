import { createLoop, sleep, type Logger, type Loop } from '@tether/common';
import { canonicalRoutes, routingHash, type Route, type SharedCertificate } from '@tether/protocol';
import type { CaddyAdmin } from './caddy-admin.js';
import { caddyTraffic } from './proxy-traffic.js';
import type { AnswererHealth, CertificateSharing, ProxyTraffic, RoutingApplyResult, RoutingController, RoutingMapInput } from '../controllers.js';
import type { ProxyConfigurator, ProxySupervisor, ReloadRecord } from './configurator.js';
import { upstreamByAddress, type EndpointSource } from './docker-endpoints.js';
import { answersDigestOnDisk } from './domain-files.js';
import { ProxyError } from './errors.js';
import type { Answerer } from './answerer.js';
import { CertificateShare, issuedHere, type IssuedCertificate } from './certificate-share.js';
import { caddyIssuerKey } from './certificate-storage.js';
import { RemoteProbes } from './remote-probes.js';
import { RoutingLane } from './routing-lane.js';
import { computeAnswers, type Answers } from './static-answers.js';
import { ContainerAddresses } from './container-addresses.js';
import { writeAnswers } from './answers-writer.js';
import type { StaticRenderOptions } from './static-render.js';
import { StaticConfigLoader } from './static-config-loader.js';

// The agent's only routing (docs/architecture.md, "Static proxy"). Caddy
// holds a config made from settings only; a routing map changes only the
// answers (the answerer's zone and the domain files), never Caddy's config.
// Compare-before-act stays, for both: the answers are written only when
// their digest differs from what is in place, the config loaded only when
// Caddy lacks its `@id` (static-config-loader.ts). The answerer is supervised
// by answersLoop, which also re-reads the ready containers, so a redeploy
// moves the SRV targets without any load.

export interface StaticRoutingControllerOptions {
  proxy: ProxyConfigurator;
  render: StaticRenderOptions;
  answerer: Answerer;
  /** Where the agent writes the domain files; default render.answersDir (container mode: Caddy reads them at another path). */
  answersDir?: string;
  endpoints: EndpointSource;
  configPath: string;
  statePath: string;
  /** Caddy's static config is checked (its `@id`) this often; 0: only on start and apply. */
  checkIntervalMs: number;
  /** The answerer is probed, and the ready containers re-read, this often (TETHER_PROXY_ANSWERER_CHECK_MS). */
  answersIntervalMs: number;
  supervisor?: ProxySupervisor;
  /** Caddy's upstreams in use: a drain counts what is open on each container (proxy-traffic.ts). */
  upstreams?: Pick<CaddyAdmin, 'upstreams'>;
  /** routing.remote: how the remote endpoints of the applied map are probed (remote-probes.ts); absent: not probed, all answered. */
  remoteProbes?: { intervalMs: number; timeoutMs: number };
  onReload?: (reload: ReloadRecord) => void;
  /** certificates.share (render.shareCertificates): Caddy's certificate storage folder as the agent sees it. */
  certificateStorage?: string;
  /** certificates.share: the port Caddy's plain HTTP is reached at on the node's private address (hello.challengePort). */
  challengePort?: number;
  logger: Logger;
  now?: () => Date;
}

export interface StaticProxyStats {
  /** Times the answers were rewritten (zone + files). */
  answerWrites: number;
  /** Routes with no ready endpoint at the last write. */
  unserved: number;
  /** Stored routes outside the static shape at the last write: not served (migrate them, docs/api.md). */
  legacy: number;
  lastAnswersAt: string | null;
}

export class StaticRoutingController extends RoutingLane implements RoutingController {
  private desired: { routes: Route[]; hash: string } | null = null;
  /** Digest of the answers in place (memory; re-derived from the zone file on start). */
  private answersDigest: string | null = null;
  /** Hash of the map whose answers were last published in this run (the static config serves nothing without them). */
  private publishedFor: string | null = null;
  /** Caddy's static config: loaded when Caddy does not hold it (static-config-loader.ts). */
  private readonly config: StaticConfigLoader;
  private readonly checkLoop: Loop | null;
  private readonly answersLoop: Loop | null;
  private closed: Promise<void> | null = null;
  readonly stats: StaticProxyStats = { answerWrites: 0, unserved: 0, legacy: 0, lastAnswersAt: null };
  readonly traffic: ProxyTraffic | undefined;
  private readonly answersDir: string;
  private readonly addresses: ContainerAddresses;
  /** Other nodes' endpoints of the applied map, probed by this agent: failing ones leave the answers. */
  readonly remote: RemoteProbes | null;
  /** certificates.share: shared certificates in place, and what this node issued that the panel has not stored. */
  readonly certificates: CertificateShare | null;

  constructor(private readonly options: StaticRoutingControllerOptions) {
    super(options, options.now ?? (() => new Date()));
    this.answersDir = options.answersDir ?? options.render.answersDir;
    this.addresses = new ContainerAddresses(() => this.options.endpoints());
    this.traffic = options.upstreams
      ? caddyTraffic({ admin: options.upstreams, switchAnswers: () => this.switchAnswers(), addressesOf: (ids) => this.addresses.of(ids) })
      : undefined;
    this.config = new StaticConfigLoader({ ...options, now: this.now, store: () => this.ready() });
    const onError = (what: string) => (error: unknown) => options.logger.warn({ err: error }, `${what} failed; retrying next interval`);
    this.checkLoop =
      options.checkIntervalMs > 0
        ? createLoop({ name: 'proxy-check', intervalMs: options.checkIntervalMs, run: () => this.check(), onError: onError('proxy check') })
        : null;
    this.answersLoop =
      options.answersIntervalMs > 0
        ? createLoop({ name: 'proxy-answers', intervalMs: options.answersIntervalMs, run: () => this.refreshAnswers(), onError: onError('answerer check') })
        : null;
    // A probe verdict changes the answers at once, without waiting for the answers loop's next tick.
    const onRemoteChange = () => void (this.answersLoop ? this.answersLoop.trigger() : this.refreshAnswers().catch(onError('answers refresh')));
    this.remote = options.remoteProbes ? new RemoteProbes({ ...options.remoteProbes, onChange: onRemoteChange, logger: options.logger }) : null;
    this.certificates =
      options.render.shareCertificates && options.certificateStorage
        ? new CertificateShare({ storageRoot: options.certificateStorage, issuerKey: caddyIssuerKey(options.render), logger: options.logger })
        : null;
  }

  /** certificates.share as the session drives it; absent when this proxy does not share (or has no storage to share from). */
  get certificateSharing(): CertificateSharing | undefined {
    const share = this.certificates;
    if (!share || this.options.challengePort === undefined) return undefined;
    return {
      challengePort: this.options.challengePort,
      install: (certificates) => this.installCertificates(certificates),
      unreported: () => this.unreportedCertificates(),
      markReported: (issued) => share.markReported(issued),
      forgetReported: () => share.forgetReported(),
    };
  }

  /**
   * certificates.share: the complete set of certificates this node serves for other issuers (the panel's
   * `certificates`), written into Caddy's storage before the answers let `ask` allow their domains.
   */
  async installCertificates(certificates: readonly SharedCertificate[]): Promise<{ failed: string[] }> {
    if (!this.certificates) return { failed: certificates.map((c) => c.domain) };
    const { changed, failed } = await this.serialize(() => this.certificates!.install(certificates));
    if (changed) await this.refreshAnswers();
    return { failed };
  }

  /** certificates.share: certificates Caddy obtained for domains this node issues that the panel has not stored yet. */
  async unreportedCertificates(): Promise<IssuedCertificate[]> {
    if (!this.certificates || this.desired === null) return [];
    return this.certificates.unreported(issuedHere(this.desired.routes));
  }

  /** The map to serve from now on; its remote endpoints are the ones probed. */
  private setDesired(routes: Route[], hash: string): void {
    this.desired = { routes, hash };
    this.remote?.track(routes.flatMap((r) => r.remote?.map((e) => e.endpoint) ?? []));
  }

  /** Admin API calls of the config checks (tests read how cheap a no-op check is). */
  get adminCalls(): { idReads: number; configReads: number; loads: number } {
    return this.config.adminCalls;
  }

  get knot(): Answerer {
    return this.options.answerer;
  }

  answerer(): AnswererHealth {
    const { up, starts, restarts, lastFailure, lastFailureAt } = this.options.answerer.status();
    return { up, starts, restarts, lastFailure, lastFailureAt, unserved: this.stats.unserved, legacy: this.stats.legacy };
  }

  async start(): Promise<void> {
    const store = await this.ready();
    this.answersDigest = await answersDigestOnDisk(this.answersDir, this.options.answerer.zonePath);
    // Answers first (so the static config never serves a domain the answerer cannot name), then the config.
    await this.options.answerer.ensure().catch((error: unknown) => this.options.logger.error({ err: error }, 'answerer not running at start'));
    if (store.appliedHash !== null) {
      // The last applied map, remote endpoints included: probing needs no panel.
      this.setDesired([...store.appliedRoutes], store.appliedHash);
      const result = await this.serialize(() => this.reconcile(this.desired!.routes, this.desired!.hash, true));
      if (result.error) this.options.logger.warn({ error: result.error }, 'static proxy start: routes in place not fully restored');
    } else {
      // Loaded at start even before the first map: Caddy answers `no-route` instead of nothing.
      await this.check({ full: true }).catch((error: unknown) => this.options.logger.warn({ err: error }, 'static proxy config not loaded at start; retrying'));
    }
    this.checkLoop?.start();
    this.answersLoop?.start();
    this.remote?.start();
  }

  /** Caddy and the answerer are left running: both must outlive the agent. */
  stop(): Promise<void> {
    this.closed ??= (async () => {
      await this.remote?.stop();
      await this.checkLoop?.stop();
      await this.answersLoop?.stop();
      await this.idle();
      await this.options.proxy.close();
    })();
    return this.closed;
  }

  apply(map: RoutingMapInput): Promise<RoutingApplyResult> {
    return this.serialize(async () => {
      try {
        const ordered = canonicalRoutes(map.routes);
        const hash = routingHash(ordered);
        if (hash !== map.hash) {
          return this.answer(map.hash, false, false, new ProxyError('PROXY_HASH_MISMATCH', `map hash ${map.hash} is not the hash of its routes (${hash})`));
        }
        this.setDesired(ordered, hash);
        return await this.reconcile(ordered, hash, false);
      } catch (error) {
        return this.answer(map.hash, false, false, error);
      }
    });
  }

  /**
   * The static config is in Caddy (one `@id` read; a full compare with `full`). Not before the answers for the map in
   * place are published: loading it then would swap what Caddy serves (a per-route config, say) for a config whose
   * every route answers no-route, while the answerer cannot yet name their upstreams.
   */
  async check(options: { full?: boolean } = {}): Promise<void> {
    const desired = this.desired;
    const error = await this.serialize(async () => {
      try {
        if (desired !== null && this.publishedFor !== desired.hash) {
          throw new ProxyError('PROXY_ANSWERS_UNPUBLISHED', 'the answers for the routes in place are not published yet (the answerer did not take them): the static config waits');
        }
        await this.config.ensure(options.full === true);
        return null;
      } catch (e) {
        return e;
      }
    });
    if (error) throw error;
  }

  /** The answerer answers, and the answers match the ready containers now. */
  async refreshAnswers(): Promise<void> {
    await this.options.answerer.ensure();
    const desired = this.desired;
    if (desired === null) return;
    const error = await this.serialize(async () => {
      try {
        await this.publish(desired.routes);
        this.publishedFor = desired.hash;
        return null;
      } catch (e) {
        return e;
      }
    });
    if (error) throw error;
  }

  /** A drain's switch: answers written now (without what `notServing` names), then Caddy's cached lookups expire. */
  async switchAnswers(): Promise<void> {
    await this.refreshAnswers();
    // 100 ms beyond the refresh: a lookup answered just before the write may be stamped just after it.
    await sleep(this.options.render.lookupRefreshMs + 100);
  }

  private async reconcile(ordered: Route[], hash: string, full: boolean): Promise<RoutingApplyResult> {
    const store = await this.ready();
    let changed = false;
    let reloaded = false;
    try {
      ({ changed } = await this.publish(ordered));
      this.publishedFor = hash;
    } catch (error) {
      return this.answer(hash, false, false, error);
    }
    try {
      reloaded = await this.config.ensure(full, { hash, routes: ordered });
    } catch (error) {
      return this.answer(hash, changed, false, error);
    }
    try {
      if (!reloaded) await store.markApplied(hash, ordered, this.config.renderDigest);
    } catch (error) {
      return this.answer(hash, changed || reloaded, reloaded, error);
    }
    return this.answer(hash, changed || reloaded, reloaded, null);
  }

  /** Writes the answers for `routes` when they differ from those in place. */
  private async publish(routes: readonly Route[]): Promise<{ answers: Answers; changed: boolean }> {
    const canary = this.options.render.canary ? await upstreamByAddress(this.options.render.canary.upstream) : null;
    const endpoints = await this.options.endpoints();
    this.addresses.remember(endpoints);
    const answers = computeAnswers(routes, endpoints, {
      canaryUpstream: canary,
      ...(this.remote ? { failingRemote: this.remote.failingEndpoints } : {}),
      ...(this.certificates ? { sharedInPlace: this.certificates.sharedInPlace } : {}),
    });
    this.stats.unserved = answers.unserved;
    if (answers.legacy.length !== this.stats.legacy && answers.legacy.length > 0) {
      this.options.logger.warn({ routes: answers.legacy.map((r) => `${r.domain}${r.pathPrefix ?? ''}`).slice(0, 20), count: answers.legacy.length }, 'routes outside the static shape are not served');
    }
    this.stats.legacy = answers.legacy.length;
    if (answers.digest === this.answersDigest) return { answers, changed: false };
    await writeAnswers(this.answersDir, answers, (lines) => this.options.answerer.publish(lines));
    this.answersDigest = answers.digest;
    this.stats.answerWrites += 1;
    this.stats.lastAnswersAt = this.now().toISOString();
    return { answers, changed: true };
  }
}
