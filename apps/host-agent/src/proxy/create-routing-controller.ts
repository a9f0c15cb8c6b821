import type { Logger } from '@tether/common';
import path from 'node:path';
import type Docker from 'dockerode';
import { DockerContainerRuntime } from '../runtime/docker-runtime.js';
import { DEFAULT_RUNTIME_TIMING } from '../runtime/settings.js';
import { createCaddyAdmin, parseAdminUrl } from './caddy-admin.js';
import { CaddyContainer, caddyHostDir, caddyHostPaths } from './caddy-container.js';
import { CADDY_CONTAINER, CADDY_CONTAINER_ADMIN, ensureCaddyImage } from './caddy-image.js';
import type { ReloadRecord } from './configurator.js';
import type { CaddyAdminSettings, ProxyTlsMode } from './render.js';
import type { EndpointSource } from './docker-endpoints.js';
import { KnotAnswerer } from './knot-answerer.js';
import { KnotContainerAnswerer } from './knot-container-answerer.js';
import { ensureKnotImage } from './knot-image.js';
import { StaticRoutingController } from './static-routing-controller.js';

// The one way to build the routing controller (docs/architecture.md, "Static
// proxy"): Caddy holds a config made from settings only and an answerer
// (knotd) names the upstreams per request. Two places for them, per
// TETHER_PROXY: beside an operator's Caddy (external: knotd a detached
// process, the domain files read in place) or the agent's own Caddy container
// (container: knotd a container in Caddy's network namespace, the domain
// files under the data folder Caddy already mounts, so moving to this config
// never recreates Caddy). The agent calls createRoutingController(config, …);
// tests and tools call the per-place functions with explicit options
// (routing-from-config.ts makes them from the configuration).

export interface ServingOptions {
  tls: ProxyTlsMode;
  httpPort: number;
  httpsPort: number;
  acmeEmail?: string | null;
  /** The ACME CA's directory URL and the root its HTTPS certificate is signed by (TETHER_PROXY_ACME_CA, _CA_ROOT). */
  acmeCa?: string | null;
  acmeCaRoot?: string | null;
  /** certificates.share: forward other issuers' HTTP-01 challenges, HTTP-01 only (static-render.ts). */
  shareCertificates?: boolean;
}

export interface CommonOptions {
  stateDir: string;
  /** Caddy's canary server (canary/): its port and the endpoint it proxies to; absent when the canary is off. */
  canary?: { port: number; upstream: string } | null;
  /** Default: stateDir/caddy.json. */
  configPath?: string;
  adminTimeoutMs: number;
  checkIntervalMs: number;
  serving: ServingOptions;
  onReload?: (reload: ReloadRecord) => void;
  logger: Logger;
  now?: () => Date;
  knotd: string;
  knotc: string;
  answererProbeTimeoutMs: number;
  /** The answerer is probed, and the ready containers re-read, this often (TETHER_PROXY_ANSWERER_CHECK_MS). */
  answersIntervalMs: number;
  lookupRefreshMs: number;
  askPort: number;
  issuer: 'acme' | 'internal';
  /** TLS auto: the issuance log as Caddy writes it (issuance-logging.ts); null: none. */
  issuanceLog?: string | null;
  endpoints: EndpointSource;
  /** routing.remote: how other nodes' endpoints in the map are probed (TETHER_REMOTE_PROBE_*); absent: not probed. */
  remoteProbes?: { intervalMs: number; timeoutMs: number };
  /**
   * certificates.share (serving.shareCertificates), external mode: Caddy's certificate storage folder as the agent
   * sees it (the operator's Caddy's data folder + `/caddy`); without it nothing is shared. Container mode: its data mount.
   */
  certificateStorage?: string | null;
}

export interface ExternalProxyOptions extends CommonOptions {
  /** http(s)://host:port or unix:///path of the operator's Caddy. */
  adminUrl: string;
  /** The admin listen address to keep in the config; default: the one adminUrl names. */
  adminListen?: string;
  /** Where the answerer listens; Caddy's resolver. */
  answererListen: { host: string; port: number };
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
  /** Port knotd listens on in the Caddy container's network namespace (Caddy's resolver: udp/127.0.0.1:<port>). */
  answererPort: number;
  /** An existing answerer image to run; default: built locally from answererRoot, else from knotd and knotc. */
  answererImage?: string;
  /** The answerer tree the agent image carries (TETHER_ANSWERER_ROOT). */
  answererRoot?: string | null;
}

/** The admin listen address Caddy must keep so that adminUrl stays valid after every load. */
export function adminSettingsFor(adminUrl: string, listen?: string): CaddyAdminSettings {
  const { socketPath } = parseAdminUrl(adminUrl);
  if (socketPath) return { listen: listen ?? `unix/${socketPath}`, origins: ['localhost'] };
  const url = new URL(adminUrl);
  // URL keeps IPv6 hosts in brackets, the form Caddy's listen addresses use too.
  return { listen: listen ?? `${url.hostname}:${url.port || (url.protocol === 'https:' ? 443 : 80)}` };
}

/** The answers' folder inside Caddy's data folder (container mode): `/data/answers` as Caddy sees it. */
const CONTAINER_ANSWERS = 'answers';

function answerSettings(o: CommonOptions, answerer: string, answersDir: string) {
  return { answerer, lookupRefreshMs: o.lookupRefreshMs, answersDir, askPort: o.askPort, issuer: o.issuer, issuanceLog: o.issuanceLog ?? null };
}

function controllerOptions(o: CommonOptions) {
  return {
    configPath: o.configPath ?? path.join(o.stateDir, 'caddy.json'),
    statePath: path.join(o.stateDir, 'routing-state.json'),
    endpoints: o.endpoints,
    checkIntervalMs: o.checkIntervalMs,
    answersIntervalMs: o.answersIntervalMs,
    ...(o.remoteProbes ? { remoteProbes: o.remoteProbes } : {}),
    ...(o.onReload ? { onReload: o.onReload } : {}),
    ...(o.certificateStorage ? { certificateStorage: o.certificateStorage } : {}),
    // The host's HTTP port: in container mode Docker publishes Caddy's 80 there, on the private address too.
    challengePort: o.serving.httpPort,
    logger: o.logger,
    ...(o.now ? { now: o.now } : {}),
  };
}

/** An operator's Caddy: knotd as a detached process, the domain files read by Caddy in place. */
export function createExternalRoutingController(o: ExternalProxyOptions): StaticRoutingController {
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
      // The operator's Caddy listens for the canary on loopback only.
      canary: o.canary ? { listen: `127.0.0.1:${o.canary.port}`, upstream: o.canary.upstream } : null,
      ...answerSettings(o, answerer.caddyAddress, path.resolve(o.stateDir, 'answers')),
    },
    answerer,
  });
}

/**
 * The agent's Caddy container: the answerer is a container in Caddy's network namespace, the domain files a
 * folder of Caddy's own data mount (no mount of their own: the container's settings do not depend on them).
 */
export function createContainerRoutingController(o: ContainerProxyOptions): {
  controller: StaticRoutingController;
  container: CaddyContainer;
  answerer: KnotContainerAnswerer;
} {
  const hostDir = caddyHostDir(o.stateDir);
  const proxy = createCaddyAdmin({ adminUrl: o.adminUrl ?? `unix://${caddyHostPaths(hostDir).socketPath}`, timeoutMs: o.adminTimeoutMs });
  const user = o.user ?? `${process.getuid?.() ?? 0}:${process.getgid?.() ?? 0}`;
  const runtime = new DockerContainerRuntime(o.docker, { callTimeoutMs: o.dockerTimeoutMs ?? DEFAULT_RUNTIME_TIMING.callTimeoutMs });
  const container = new CaddyContainer({
    runtime,
    network: o.network,
    node: o.node,
    hostDir,
    // Built at most once per agent run; a failed build is tried again on the next check.
    image: once(() => (o.image ? Promise.resolve(o.image) : ensureCaddyImage(o.docker, { binary: o.caddyBinary }))),
    bindAddress: o.bindAddress,
    httpPort: o.serving.httpPort,
    httpsPort: o.serving.httpsPort,
    tls: o.serving.tls,
    user,
    probe: () => proxy.readRunning(),
    logger: o.logger,
  });
  const answerer = new KnotContainerAnswerer({
    runtime,
    docker: o.docker,
    node: o.node,
    dir: path.resolve(o.stateDir, 'answerer'),
    port: o.answererPort,
    image: once(() => (o.answererImage ? Promise.resolve(o.answererImage) : ensureKnotImage(o.docker, { knotd: o.knotd, knotc: o.knotc, root: o.answererRoot ?? null }))),
    user,
    proxy: container,
    probeTimeoutMs: o.answererProbeTimeoutMs,
    logger: o.logger,
  });
  const controller = new StaticRoutingController({
    ...controllerOptions(o),
    proxy,
    upstreams: proxy,
    render: {
      ...o.serving,
      admin: CADDY_CONTAINER_ADMIN,
      // Inside the container Caddy always listens on 80/443; the host ports are Docker's mapping.
      httpPort: CADDY_CONTAINER.httpPort,
      httpsPort: CADDY_CONTAINER.httpsPort,
      // In its own network namespace: reachable at the container's address on Tether's network, no port published.
      canary: o.canary ? { listen: `:${o.canary.port}`, upstream: o.canary.upstream } : null,
      ...answerSettings(o, answerer.caddyAddress, path.posix.join(CADDY_CONTAINER.dataDir, CONTAINER_ANSWERS)),
    },
    answersDir: path.resolve(caddyHostPaths(hostDir).dataDir, CONTAINER_ANSWERS),
    // The image sets XDG_DATA_HOME to its data mount: certmagic's storage is its `caddy` folder.
    certificateStorage: path.resolve(caddyHostPaths(hostDir).dataDir, 'caddy'),
    answerer,
    supervisor: container,
  });
  return { controller, container, answerer };
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
