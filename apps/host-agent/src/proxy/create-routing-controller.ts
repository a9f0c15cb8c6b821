import type { Logger } from '@tether/common';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import type { AgentConfig } from '../config.js';
import type { RoutingController } from '../controllers.js';
import { DockerContainerRuntime } from '../runtime/docker-runtime.js';
import { DEFAULT_RUNTIME_TIMING } from '../runtime/settings.js';
import { DisabledRouting } from '../null-controllers.js';
import { createCaddyAdmin, parseAdminUrl } from './caddy-admin.js';
import { CaddyContainer, caddyHostPaths } from './caddy-container.js';
import { CADDY_CONTAINER, CADDY_CONTAINER_ADMIN, ensureCaddyImage } from './caddy-image.js';
import { CaddyRoutingController, type ReloadRecord } from './routing-controller.js';
import type { CaddyAdminSettings, ProxyTlsMode } from './render.js';
import { dockerEndpoints, type EndpointSource } from './docker-endpoints.js';
import { KnotAnswerer } from './knot-answerer.js';
import { StaticRoutingController } from './static-routing-controller.js';

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

export function createContainerRoutingController(o: ContainerProxyOptions): { controller: CaddyRoutingController; container: CaddyContainer } {
  const hostDir = path.join(o.stateDir, 'caddy');
  const proxy = createCaddyAdmin({ adminUrl: o.adminUrl ?? `unix://${caddyHostPaths(hostDir).socketPath}`, timeoutMs: o.adminTimeoutMs });
  let image: Promise<string> | undefined;
  const container = new CaddyContainer({
    runtime: new DockerContainerRuntime(o.docker, { callTimeoutMs: o.dockerTimeoutMs ?? DEFAULT_RUNTIME_TIMING.callTimeoutMs }),
    network: o.network,
    node: o.node,
    hostDir,
    // Built at most once per agent run; a failed build is tried again on the next check.
    image: () => (image ??= (o.image ? Promise.resolve(o.image) : ensureCaddyImage(o.docker, { binary: o.caddyBinary })).catch((error: unknown) => {
      image = undefined;
      throw error;
    })),
    bindAddress: o.bindAddress,
    httpPort: o.serving.httpPort,
    httpsPort: o.serving.httpsPort,
    tls: o.serving.tls,
    user: o.user ?? `${process.getuid?.() ?? 0}:${process.getgid?.() ?? 0}`,
    probe: () => proxy.readRunning(),
    logger: o.logger,
  });
  const controller = new CaddyRoutingController({
    ...statePaths(o),
    proxy,
    upstreams: proxy,
    // Inside the container Caddy always listens on 80/443; the host ports are Docker's mapping.
    render: {
      ...o.serving,
      admin: CADDY_CONTAINER_ADMIN,
      httpPort: CADDY_CONTAINER.httpPort,
      httpsPort: CADDY_CONTAINER.httpsPort,
      // In its own network namespace: reachable at the container's address on Tether's network, no port published.
      canary: o.canary ? { listen: `:${o.canary.port}`, upstream: o.canary.upstream } : null,
    },
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
  if (p.kind === 'external' && p.routing === 'static') {
    return createStaticExternalRoutingController({
      ...common,
      adminUrl: p.caddyAdminUrl as string,
      ...(p.caddyAdminListen ? { adminListen: p.caddyAdminListen } : {}),
      serving: { ...common.serving },
      answererListen: p.answererListen,
      knotd: p.knotd,
      knotc: p.knotc,
      answererProbeTimeoutMs: p.answererProbeTimeoutMs,
      answersIntervalMs: p.answererCheckMs,
      lookupRefreshMs: p.lookupRefreshMs,
      askPort: p.askPort,
      issuer: p.tlsIssuer,
      issuanceLog: p.issuanceLog,
      endpoints: config.runtime.kind === 'docker'
        ? dockerEndpoints(dockerOf(deps), { network: config.runtime.network, node: config.nodeName ?? os.hostname(), ...(deps.notServing ? { notServing: deps.notServing } : {}) })
        : () => Promise.resolve(new Map()),
    });
  }
  if (p.kind === 'external') {
    // loadConfig refuses external mode without an admin URL.
    return createExternalRoutingController({ ...common, adminUrl: p.caddyAdminUrl as string, ...(p.caddyAdminListen ? { adminListen: p.caddyAdminListen } : {}) });
  }
  const { controller, container } = createContainerRoutingController({
    ...common,
    docker: dockerOf(deps),
    dockerTimeoutMs: config.runtime.timing.callTimeoutMs,
    network: config.runtime.network,
    node: config.nodeName ?? os.hostname(),
    ...(p.caddyImage ? { image: p.caddyImage } : {}),
    caddyBinary: p.caddyBinary,
    bindAddress: p.bindAddress,
  });
  deps.proxyAddress?.(() => container.address());
  return controller;
}

export interface StaticProxyOptions extends CommonOptions {
  /** http(s)://host:port or unix:///path of the operator's Caddy (external mode). */
  adminUrl: string;
  adminListen?: string;
  /** Where the answerer listens; Caddy's resolver. */
  answererListen: { host: string; port: number };
  knotd: string;
  knotc: string;
  answererProbeTimeoutMs: number;
  answersIntervalMs: number;
  lookupRefreshMs: number;
  askPort: number;
  issuer: 'acme' | 'internal';
  /** TLS auto: the file Caddy writes its issuance log to (TETHER_PROXY_ISSUANCE_LOG); absent: none. */
  issuanceLog?: string | null;
  endpoints: EndpointSource;
}

/** TETHER_PROXY_ROUTING=static with an operator's Caddy: the answerer and the domain files live under stateDir. */
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
    configPath: o.configPath ?? path.join(o.stateDir, 'caddy.json'),
    statePath: path.join(o.stateDir, 'routing-state.json'),
    proxy,
    upstreams: proxy,
    render: {
      admin: adminSettingsFor(o.adminUrl, o.adminListen),
      ...o.serving,
      canary: o.canary ? { listen: `127.0.0.1:${o.canary.port}`, upstream: o.canary.upstream } : null,
      answerer: answerer.caddyAddress,
      lookupRefreshMs: o.lookupRefreshMs,
      answersDir: path.resolve(o.stateDir, 'answers'),
      askPort: o.askPort,
      issuer: o.issuer,
      issuanceLog: o.issuanceLog ?? null,
    },
    answerer,
    endpoints: o.endpoints,
    checkIntervalMs: o.checkIntervalMs,
    answersIntervalMs: o.answersIntervalMs,
    ...(o.onReload ? { onReload: o.onReload } : {}),
    logger: o.logger,
    ...(o.now ? { now: o.now } : {}),
  });
}
