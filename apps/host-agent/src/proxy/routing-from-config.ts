import type { Logger } from '@tether/common';
import type Docker from 'dockerode';
import type { AgentConfig } from '../config.js';
import type { RoutingController } from '../controllers.js';
import { DockerContainerRuntime } from '../runtime/docker-runtime.js';
import { DisabledRouting } from '../null-controllers.js';
import { runningProxy } from './caddy-container.js';
import type { ReloadRecord } from './configurator.js';
import { createContainerRoutingController, createExternalRoutingController, type CommonOptions } from './create-routing-controller.js';
import { dockerEndpoints } from './docker-endpoints.js';
import { issuanceLogPaths } from './issuance-logging.js';

// The agent's routing controller from its configuration (compose.ts): TETHER_PROXY picks the place
// (create-routing-controller.ts builds each from explicit options, as tests and tools do), and the
// configuration's proxy settings become those options here.

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
    /** Containers whose HTTP health check does not pass now (left out of the answers). */
    notServing?: () => ReadonlySet<string>;
  },
): RoutingController {
  const p = config.proxy;
  if (p.kind === 'none') return new DisabledRouting();
  const node = config.nodeName;
  const common: CommonOptions = {
    stateDir: config.stateDir,
    configPath: p.caddyConfigPath,
    adminTimeoutMs: p.adminTimeoutMs,
    checkIntervalMs: p.checkIntervalMs,
    serving: {
      tls: p.tls,
      httpPort: p.httpPort,
      httpsPort: p.httpsPort,
      acmeEmail: p.acmeEmail ?? null,
      acmeCa: p.acmeCa ?? null,
      acmeCaRoot: p.acmeCaRoot ?? null,
      // One issuer per domain needs certificates ordered from an ACME CA and a private address to forward challenges to.
      shareCertificates: p.tls === 'auto' && p.tlsIssuer === 'acme' && config.remote.privateAddress !== null,
    },
    logger: deps.logger,
    ...(deps.onReload ? { onReload: deps.onReload } : {}),
    canary: config.canary.intervalMs > 0 ? { port: config.canary.proxyPort, upstream: config.canary.upstream } : null,
    knotd: p.knotd,
    knotc: p.knotc,
    answererProbeTimeoutMs: p.answererProbeTimeoutMs,
    answersIntervalMs: p.answererCheckMs,
    lookupRefreshMs: p.lookupRefreshMs,
    askPort: p.askPort,
    issuer: p.tlsIssuer,
    issuanceLog: p.tls === 'auto' ? issuanceLogPaths(p, config.stateDir).caddyPath : null,
    // Only a panel that heard routing.remote sends remote endpoints: with none in the map nothing is probed.
    remoteProbes: { intervalMs: config.remote.probeIntervalMs, timeoutMs: config.remote.probeTimeoutMs },
    endpoints:
      config.runtime.kind === 'docker'
        ? dockerEndpoints(dockerOf(deps), { network: config.runtime.network, node, ...(deps.notServing ? { notServing: deps.notServing } : {}) })
        : () => Promise.resolve(new Map()),
  };
  if (p.kind === 'external') {
    return createExternalRoutingController({
      ...common,
      adminUrl: p.caddyAdminUrl,
      ...(p.caddyAdminListen ? { adminListen: p.caddyAdminListen } : {}),
      answererListen: p.answererListen,
      certificateStorage: p.caddyStorageDir,
    });
  }
  const { controller } = createContainerRoutingController({
    ...common,
    docker: dockerOf(deps),
    dockerTimeoutMs: config.runtime.timing.callTimeoutMs,
    network: config.runtime.network,
    node,
    ...(p.caddyImage ? { image: p.caddyImage } : {}),
    caddyBinary: p.caddyBinary,
    bindAddress: p.bindAddress,
    answererPort: p.answererListen.port,
    ...(p.answererImage ? { answererImage: p.answererImage } : {}),
    answererRoot: p.answererRoot,
  });
  return controller;
}

/**
 * Container mode: how the canary and route probes find the proxy container's address on Tether's network (null
 * while none runs); undefined in any other mode. Made before the routing controller, from the runtime alone.
 */
export function proxyAddressReader(config: AgentConfig, docker: Docker): (() => Promise<string | null>) | undefined {
  if (config.proxy.kind !== 'container') return undefined;
  const runtime = new DockerContainerRuntime(docker, { callTimeoutMs: config.runtime.timing.callTimeoutMs });
  const { network } = config.runtime;
  return async () => (await runningProxy(runtime, config.nodeName, network))?.address ?? null;
}
