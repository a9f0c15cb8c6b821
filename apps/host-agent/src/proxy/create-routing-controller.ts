import type { Logger } from '@tether/common';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import type { AgentConfig } from '../config.js';
import type { RoutingController } from '../controllers.js';
import { DockerContainerRuntime } from '../runtime/docker-runtime.js';
import { DEFAULT_RUNTIME_TIMING } from '../runtime/settings.js';
import { DisabledRouting } from '../null-controllers.js';
import { createCaddyAdmin, parseAdminUrl, type CaddyAdmin } from './caddy-admin.js';
import { CaddyContainer, caddyHostDir, caddyHostPaths } from './caddy-container.js';
import { CADDY_CONTAINER, CADDY_CONTAINER_ADMIN, ensureCaddyImage } from './caddy-image.js';
import { CaddyRoutingController, type ReloadRecord } from './routing-controller.js';
import type { CaddyAdminSettings, ProxyTlsMode } from './render.js';
import { dockerEndpoints } from './docker-endpoints.js';
import { createStaticContainerRoutingController, createStaticExternalRoutingController } from './create-static-routing-controller.js';
import { issuanceLogPaths } from './issuance-logging.js';

// One way to build the routing controller per TETHER_PROXY mode. The agent
// calls createRoutingController(config, …); tests and tools call the
// per-mode functions with explicit options.

export interface ServingOptions {
  tls: ProxyTlsMode;
  httpPort: number;
  httpsPort: number;
  acmeEmail?: string | null;
  /** The ACME CA's directory URL and the root its HTTPS certificate is signed by (TETHER_PROXY_ACME_CA, _CA_ROOT). */
  acmeCa?: string | null;
  acmeCaRoot?: string | null;
}

export interface CommonOptions {
  stateDir: string;
  /** Caddy's canary server (canary/): its port and the endpoint it proxies to; absent when the canary is off. */
  canary?: { port: number; upstream: string } | null;
  /** Default: stateDir/caddy.json. */
  configPath?: string;
  adminTimeoutMs: number;
  checkIntervalMs: number;
  fullCheckIntervalMs?: number;
  serving: ServingOptions;
  onReload?: (reload: ReloadRecord) => void;
  logger: Logger;
  now?: () => Date;
}

export interface ExternalProxyOptions extends CommonOptions {
  /** http(s)://host:port or unix:///path of the operator's Caddy. */
  adminUrl: string;
  /** The admin listen address to keep in the config; default: the one adminUrl names. */
  adminListen?: string;
}

export interface ContainerProxyOptions extends CommonOptions {
  docker: Docker;
  /** Bound on each Docker call of the supervision (TETHER_DOCKER_TIMEOUT_MS). */
  dockerTimeoutMs?: number;
  network: string;
  node: string;
  /** An existing image to run; default: built locally from caddyBinary. */
  image?: string;
  caddyBinary: string;
  /** Host address the HTTP(S) ports are published on (0.0.0.0 in production, 127.0.0.1 in tests). */
  bindAddress: string;
  /** uid:gid Caddy runs as; default: the agent's own. */
  user?: string;
  /** Reach the admin API through this URL instead of the socket (tests put a witness in front). */
  adminUrl?: string;
}

/** The admin listen address Caddy must keep so that adminUrl stays valid after every load. */
export function adminSettingsFor(adminUrl: string, listen?: string): CaddyAdminSettings {
  const { socketPath } = parseAdminUrl(adminUrl);
  if (socketPath) return { listen: listen ?? `unix/${socketPath}`, origins: ['localhost'] };
  const url = new URL(adminUrl);
  // URL keeps IPv6 hosts in brackets, the form Caddy's listen addresses use too.
  return { listen: listen ?? `${url.hostname}:${url.port || (url.protocol === 'https:' ? 443 : 80)}` };
}

function statePaths(o: CommonOptions) {
  return { configPath: o.configPath ?? path.join(o.stateDir, 'caddy.json'), statePath: path.join(o.stateDir, 'routing-state.json') };
}

export function createExternalRoutingController(o: ExternalProxyOptions): CaddyRoutingController {
  const proxy = createCaddyAdmin({ adminUrl: o.adminUrl, timeoutMs: o.adminTimeoutMs });
  return new CaddyRoutingController({
    ...statePaths(o),
    proxy,
    upstreams: proxy,
    // The operator's Caddy listens for the canary on loopback only.
    render: { admin: adminSettingsFor(o.adminUrl, o.adminListen), ...o.serving, canary: o.canary ? { listen: `127.0.0.1:${o.canary.port}`, upstream: o.canary.upstream } : null },
    checkIntervalMs: o.checkIntervalMs,
    ...(o.fullCheckIntervalMs ? { fullCheckIntervalMs: o.fullCheckIntervalMs } : {}),
    ...(o.onReload ? { onReload: o.onReload } : {}),
    logger: o.logger,
    ...(o.now ? { now: o.now } : {}),
  });
}

/** The supervised Caddy container and its admin client (both routing modes); `extraBinds`: more host folders Caddy reads. */
export function caddyContainerParts(o: ContainerProxyOptions, extraBinds: string[] = []): { proxy: CaddyAdmin; container: CaddyContainer } {
  const hostDir = caddyHostDir(o.stateDir);
  const proxy = createCaddyAdmin({ adminUrl: o.adminUrl ?? `unix://${caddyHostPaths(hostDir).socketPath}`, timeoutMs: o.adminTimeoutMs });
  const container = new CaddyContainer({
    runtime: runtimeOf(o),
    network: o.network,
    node: o.node,
    hostDir,
    // Built at most once per agent run; a failed build is tried again on the next check.
    image: once(() => (o.image ? Promise.resolve(o.image) : ensureCaddyImage(o.docker, { binary: o.caddyBinary }))),
    bindAddress: o.bindAddress,
    httpPort: o.serving.httpPort,
    httpsPort: o.serving.httpsPort,
    tls: o.serving.tls,
    user: userOf(o),
    ...(extraBinds.length > 0 ? { extraBinds } : {}),
    probe: () => proxy.readRunning(),
    logger: o.logger,
  });
  return { proxy, container };
}

export function runtimeOf(o: Pick<ContainerProxyOptions, 'docker' | 'dockerTimeoutMs'>): DockerContainerRuntime {
  return new DockerContainerRuntime(o.docker, { callTimeoutMs: o.dockerTimeoutMs ?? DEFAULT_RUNTIME_TIMING.callTimeoutMs });
}

export function userOf(o: Pick<ContainerProxyOptions, 'user'>): string {
  return o.user ?? `${process.getuid?.() ?? 0}:${process.getgid?.() ?? 0}`;
}

/** A value made at most once, until it fails: a failed build is tried again by the next caller. */
export function once<T>(make: () => Promise<T>): () => Promise<T> {
  let value: Promise<T> | undefined;
  return () =>
    (value ??= make().catch((error: unknown) => {
      value = undefined;
      throw error;
    }));
}

/** What the Caddy container's config is rendered with, in both routing modes. */
export function containerRenderSettings(o: CommonOptions) {
  return {
    ...o.serving,
    admin: CADDY_CONTAINER_ADMIN,
    // Inside the container Caddy always listens on 80/443; the host ports are Docker's mapping.
    httpPort: CADDY_CONTAINER.httpPort,
    httpsPort: CADDY_CONTAINER.httpsPort,
    // In its own network namespace: reachable at the container's address on Tether's network, no port published.
    canary: o.canary ? { listen: `:${o.canary.port}`, upstream: o.canary.upstream } : null,
  };
}

export function createContainerRoutingController(o: ContainerProxyOptions): { controller: CaddyRoutingController; container: CaddyContainer } {
  const { proxy, container } = caddyContainerParts(o);
  const controller = new CaddyRoutingController({
    ...statePaths(o),
    proxy,
    upstreams: proxy,
    render: containerRenderSettings(o),
    checkIntervalMs: o.checkIntervalMs,
    ...(o.fullCheckIntervalMs ? { fullCheckIntervalMs: o.fullCheckIntervalMs } : {}),
    ...(o.onReload ? { onReload: o.onReload } : {}),
    supervisor: container,
    logger: o.logger,
    ...(o.now ? { now: o.now } : {}),
  });
  return { controller, container };
}

/** The process's one Docker client (main.ts makes it); only the modes that talk to Docker need it. */
function dockerOf(deps: { docker?: Docker }): Docker {
  if (!deps.docker) throw new Error('this proxy mode talks to Docker: createRoutingController needs deps.docker');
  return deps.docker;
}

export function createRoutingController(
  config: AgentConfig,
  deps: {
    logger: Logger;
    docker?: Docker;
    onReload?: (reload: ReloadRecord) => void;
    /** Static routing: containers whose HTTP health check does not pass now (left out of the answers). */
    notServing?: () => ReadonlySet<string>;
    /** Given, in container mode, what finds the proxy container's address (the canary's way to Caddy). */
    proxyAddress?: (resolve: () => Promise<string | null>) => void;
  },
): RoutingController {
  const p = config.proxy;
  const common: CommonOptions = {
    stateDir: config.stateDir,
    configPath: p.caddyConfigPath,
    adminTimeoutMs: p.adminTimeoutMs,
    checkIntervalMs: p.checkIntervalMs,
    fullCheckIntervalMs: p.fullCheckIntervalMs,
    serving: { tls: p.tls, httpPort: p.httpPort, httpsPort: p.httpsPort, acmeEmail: p.acmeEmail ?? null, acmeCa: p.acmeCa ?? null, acmeCaRoot: p.acmeCaRoot ?? null },
    logger: deps.logger,
    ...(deps.onReload ? { onReload: deps.onReload } : {}),
    canary: config.canary.intervalMs > 0 ? { port: config.canary.proxyPort, upstream: config.canary.upstream } : null,
  };
  if (p.kind === 'none') return new DisabledRouting();
  // Made only for static routing: its endpoints talk to Docker, which the per-route modes may not have.
  const statics = () => ({
    knotd: p.knotd,
    knotc: p.knotc,
    answererProbeTimeoutMs: p.answererProbeTimeoutMs,
    answersIntervalMs: p.answererCheckMs,
    lookupRefreshMs: p.lookupRefreshMs,
    askPort: p.askPort,
    issuer: p.tlsIssuer,
    issuanceLog: p.tls === 'auto' ? issuanceLogPaths(p, config.stateDir).caddyPath : null,
    endpoints: config.runtime.kind === 'docker'
      ? dockerEndpoints(dockerOf(deps), { network: config.runtime.network, node: config.nodeName ?? os.hostname(), ...(deps.notServing ? { notServing: deps.notServing } : {}) })
      : () => Promise.resolve(new Map()),
  });
  if (p.kind === 'external' && p.routing === 'static') {
    return createStaticExternalRoutingController({
      ...common,
      ...statics(),
      adminUrl: p.caddyAdminUrl as string,
      ...(p.caddyAdminListen ? { adminListen: p.caddyAdminListen } : {}),
      answererListen: p.answererListen,
    });
  }
  if (p.kind === 'external') {
    // loadConfig refuses external mode without an admin URL.
    return createExternalRoutingController({ ...common, adminUrl: p.caddyAdminUrl as string, ...(p.caddyAdminListen ? { adminListen: p.caddyAdminListen } : {}) });
  }
  const containerOptions: ContainerProxyOptions = {
    ...common,
    docker: dockerOf(deps),
    dockerTimeoutMs: config.runtime.timing.callTimeoutMs,
    network: config.runtime.network,
    node: config.nodeName ?? os.hostname(),
    ...(p.caddyImage ? { image: p.caddyImage } : {}),
    caddyBinary: p.caddyBinary,
    bindAddress: p.bindAddress,
  };
  const { controller, container } =
    p.routing === 'static'
      ? createStaticContainerRoutingController({ ...containerOptions, ...statics(), answererPort: p.answererListen.port, ...(p.answererImage ? { answererImage: p.answererImage } : {}) })
      : createContainerRoutingController(containerOptions);
  deps.proxyAddress?.(() => container.address());
  return controller;
}
