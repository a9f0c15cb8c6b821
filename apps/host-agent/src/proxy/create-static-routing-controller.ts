import path from 'node:path';
import { createCaddyAdmin } from './caddy-admin.js';
import { CADDY_CONTAINER } from './caddy-image.js';
import { adminSettingsFor, caddyContainerParts, containerRenderSettings, once, runtimeOf, userOf, type CommonOptions, type ContainerProxyOptions } from './create-routing-controller.js';
import type { EndpointSource } from './docker-endpoints.js';
import { KnotAnswerer } from './knot-answerer.js';
import { KnotContainerAnswerer } from './knot-container-answerer.js';
import { ensureKnotImage } from './knot-image.js';
import { StaticRoutingController } from './static-routing-controller.js';
import type { CaddyContainer } from './caddy-container.js';

// TETHER_PROXY_ROUTING=static, per TETHER_PROXY mode (docs/architecture.md,
// "Static proxy"). The answerer and the domain files live under stateDir in
// both; in container mode Caddy reads the files through a read-only bind
// mount and the answerer runs in Caddy's network namespace.

/** The static settings both modes share. */
export interface StaticSettings {
  knotd: string;
  knotc: string;
  answererProbeTimeoutMs: number;
  answersIntervalMs: number;
  lookupRefreshMs: number;
  askPort: number;
  issuer: 'acme' | 'internal';
  /** TLS auto: the issuance log as Caddy writes it (issuance-logging.ts); null: none. */
  issuanceLog?: string | null;
  endpoints: EndpointSource;
}

export interface StaticProxyOptions extends CommonOptions, StaticSettings {
  /** http(s)://host:port or unix:///path of the operator's Caddy (external mode). */
  adminUrl: string;
  adminListen?: string;
  /** Where the answerer listens; Caddy's resolver. */
  answererListen: { host: string; port: number };
}

export interface StaticContainerProxyOptions extends ContainerProxyOptions, StaticSettings {
  /** Port knotd listens on in the Caddy container's network namespace (Caddy's resolver: udp/127.0.0.1:<port>). */
  answererPort: number;
  /** An existing answerer image to run; default: built locally from knotd and knotc. */
  answererImage?: string;
}

function staticRender(o: CommonOptions & StaticSettings, answerer: string, answersDir: string) {
  return { answerer, lookupRefreshMs: o.lookupRefreshMs, answersDir, askPort: o.askPort, issuer: o.issuer, issuanceLog: o.issuanceLog ?? null };
}

function controllerOptions(o: CommonOptions & StaticSettings) {
  return {
    configPath: o.configPath ?? path.join(o.stateDir, 'caddy.json'),
    statePath: path.join(o.stateDir, 'routing-state.json'),
    endpoints: o.endpoints,
    checkIntervalMs: o.checkIntervalMs,
    answersIntervalMs: o.answersIntervalMs,
    ...(o.onReload ? { onReload: o.onReload } : {}),
    logger: o.logger,
    ...(o.now ? { now: o.now } : {}),
  };
}

/** TETHER_PROXY_ROUTING=static with an operator's Caddy: knotd as a detached process, files read by Caddy in place. */
export function createStaticExternalRoutingController(o: StaticProxyOptions): StaticRoutingController {
  const answerer = new KnotAnswerer({
    dir: path.join(o.stateDir, 'answerer'),
    listen: o.answererListen,
    knotd: o.knotd,
    knotc: o.knotc,
    probeTimeoutMs: o.answererProbeTimeoutMs,
    logger: o.logger,
  });
  const proxy = createCaddyAdmin({ adminUrl: o.adminUrl, timeoutMs: o.adminTimeoutMs });
  return new StaticRoutingController({
    ...controllerOptions(o),
    proxy,
    upstreams: proxy,
    render: {
      admin: adminSettingsFor(o.adminUrl, o.adminListen),
      ...o.serving,
      canary: o.canary ? { listen: `127.0.0.1:${o.canary.port}`, upstream: o.canary.upstream } : null,
      ...staticRender(o, answerer.caddyAddress, path.resolve(o.stateDir, 'answers')),
    },
    answerer,
  });
}

/**
 * TETHER_PROXY_ROUTING=static with the agent's Caddy container: the answerer is
 * a container in Caddy's network namespace, the domain files a read-only mount.
 */
export function createStaticContainerRoutingController(o: StaticContainerProxyOptions): {
  controller: StaticRoutingController;
  container: CaddyContainer;
  answerer: KnotContainerAnswerer;
} {
  const answersDir = path.resolve(o.stateDir, 'answers');
  const { proxy, container } = caddyContainerParts(o, [`${answersDir}:${CADDY_CONTAINER.answersDir}:ro`]);
  const answerer = new KnotContainerAnswerer({
    runtime: runtimeOf(o),
    docker: o.docker,
    node: o.node,
    dir: path.resolve(o.stateDir, 'answerer'),
    port: o.answererPort,
    image: once(() => (o.answererImage ? Promise.resolve(o.answererImage) : ensureKnotImage(o.docker, { knotd: o.knotd, knotc: o.knotc }))),
    user: userOf(o),
    proxy: container,
    probeTimeoutMs: o.answererProbeTimeoutMs,
    logger: o.logger,
  });
  const controller = new StaticRoutingController({
    ...controllerOptions(o),
    proxy,
    upstreams: proxy,
    render: { ...containerRenderSettings(o), ...staticRender(o, answerer.caddyAddress, CADDY_CONTAINER.answersDir) },
    answersDir,
    answerer,
    supervisor: container,
  });
  return { controller, container, answerer };
}
