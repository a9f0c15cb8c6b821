import { sleep, type Logger } from '@tether/common';
import { createHash } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import { LABELS, ensureNetwork } from '../docker/docker-client.js';
import { canonicalJson } from './canonical-json.js';
import { CADDY_CONTAINER } from './caddy-image.js';
import { ProxyError } from './errors.js';
import type { ProxyTlsMode } from './render.js';
import type { ProxySupervisor } from './routing-controller.js';

// Container mode: the agent runs Caddy itself, on Tether's Docker network so
// upstreams are the services' stable aliases. Supervision only keeps the
// process there; a Caddy that was recreated or restarted boots with its
// bootstrap config (admin API only), and the controller's next check sees
// "differs" and loads the routes again.

/** Label holding a hash of the container's settings: other settings (image, ports) mean recreate. */
const SPEC_LABEL = 'tether.proxy-spec';

export interface CaddyContainerOptions {
  docker: Docker;
  network: string;
  /** Value of the tether.node label, which finds this node's proxy. */
  node: string;
  /** Host folder for Caddy's data (certificates survive a recreate) and its admin socket. */
  hostDir: string;
  /** Resolves the image tag (building the image when missing). */
  image: () => Promise<string>;
  /** Host address the HTTP(S) ports are published on. */
  bindAddress: string;
  httpPort: number;
  httpsPort: number;
  tls: ProxyTlsMode;
  /** uid:gid Caddy runs as, so the agent can use the socket and data it creates. */
  user: string;
  /** Resolves once Caddy's admin API answers. */
  probe: () => Promise<unknown>;
  logger: Logger;
  /** How long a started container may take until its admin API answers. */
  readyTimeoutMs?: number;
  /** Upper bound of one ensure() (image build, Docker calls, readiness). */
  ensureTimeoutMs?: number;
}

/** Host paths of the folders shared with the container, and of the admin socket. */
export function caddyHostPaths(hostDir: string) {
  const socketDir = path.join(hostDir, 'run');
  return { dataDir: path.join(hostDir, 'data'), socketDir, socketPath: path.join(socketDir, 'admin.sock') };
}

const ignoreGone = (error: unknown) => {
  const status = (error as { statusCode?: number }).statusCode;
  // 404: already gone; 409: already being removed; 304: already started.
  if (status !== 404 && status !== 409 && status !== 304) throw error;
};

export class CaddyContainer implements ProxySupervisor {
  private readonly paths: ReturnType<typeof caddyHostPaths>;
  private inFlight: Promise<void> | null = null;

  constructor(private readonly options: CaddyContainerOptions) {
    this.paths = caddyHostPaths(options.hostDir);
  }

  /**
   * Concurrent callers (a push and the periodic check) share one pass, so two
   * containers are never created. Bounded in time: a hung Docker engine must
   * not hold every routing push behind it.
   */
  ensure(): Promise<void> {
    if (this.inFlight) return this.inFlight;
    const limitMs = this.options.ensureTimeoutMs ?? 60_000;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ProxyError('PROXY_CONTAINER_FAILED', `docker did not finish within ${limitMs} ms`)), limitMs);
    });
    this.inFlight = Promise.race([this.ensureOnce(), deadline])
      .catch((error: unknown) => {
        if (error instanceof ProxyError) throw error;
        throw new ProxyError('PROXY_CONTAINER_FAILED', `docker: ${(error as Error).message}`, { cause: error });
      })
      .finally(() => {
        clearTimeout(timer);
        this.inFlight = null;
      });
    return this.inFlight;
  }

  private async ensureOnce(): Promise<void> {
    const { docker, logger } = this.options;
    let spec: Docker.ContainerCreateOptions;
    try {
      spec = this.spec(await this.options.image());
    } catch (error) {
      throw new ProxyError('PROXY_CONTAINER_FAILED', `caddy image: ${(error as Error).message}`, { cause: error });
    }
    const specHash = String(spec.Labels?.[SPEC_LABEL]);
    const found = await this.list();
    const keep = found.find((c) => c.Labels[SPEC_LABEL] === specHash);
    for (const c of found) {
      if (c === keep) continue;
      logger.warn({ container: c.Id }, 'removing proxy container with outdated settings');
      await docker.getContainer(c.Id).remove({ force: true }).catch(ignoreGone);
    }
    if (!keep) {
      await this.create(spec);
      logger.info({ node: this.options.node }, 'proxy container created');
    } else if (keep.State !== 'running' && keep.State !== 'restarting') {
      await docker.getContainer(keep.Id).start().catch(ignoreGone);
      logger.warn({ container: keep.Id, state: keep.State }, 'proxy container was not running; started');
    } else {
      return;
    }
    await this.waitReady();
  }

  /** Removes the proxy container (decommissioning a node; tests). An agent stop leaves it running. */
  async remove(): Promise<void> {
    for (const c of await this.list()) await this.options.docker.getContainer(c.Id).remove({ force: true }).catch(ignoreGone);
  }

  private list() {
    const { node } = this.options;
    return this.options.docker.listContainers({
      all: true,
      filters: { label: [`${LABELS.managed}=true`, `${LABELS.role}=proxy`, `${LABELS.node}=${node}`] },
    });
  }

  private spec(image: string): Docker.ContainerCreateOptions {
    const { bindAddress, httpPort, httpsPort, tls, network, node, user } = this.options;
    const ports: Record<string, Array<{ HostIp: string; HostPort: string }>> = {
      [`${CADDY_CONTAINER.httpPort}/tcp`]: [{ HostIp: bindAddress, HostPort: String(httpPort) }],
    };
    if (tls === 'auto') {
      ports[`${CADDY_CONTAINER.httpsPort}/tcp`] = [{ HostIp: bindAddress, HostPort: String(httpsPort) }];
      // HTTP/3, which Caddy serves on its HTTPS port.
      ports[`${CADDY_CONTAINER.httpsPort}/udp`] = [{ HostIp: bindAddress, HostPort: String(httpsPort) }];
    }
    const settings = {
      Image: image,
      User: user,
      ExposedPorts: Object.fromEntries(Object.keys(ports).map((p) => [p, {}])),
      HostConfig: {
        PortBindings: ports,
        Binds: [`${this.paths.dataDir}:${CADDY_CONTAINER.dataDir}`, `${this.paths.socketDir}:${CADDY_CONTAINER.socketDir}`],
        // Docker brings Caddy back after a crash or a host reboot even before the agent runs again.
        RestartPolicy: { Name: 'unless-stopped' },
        // Lets Caddy bind 80 and 443 in its own network namespace without running as root.
        Sysctls: { 'net.ipv4.ip_unprivileged_port_start': '0' },
      },
      NetworkingConfig: { EndpointsConfig: { [network]: {} } },
    };
    const specHash = createHash('sha256').update(canonicalJson(settings)).digest('hex').slice(0, 16);
    return {
      ...settings,
      name: `tether-proxy-${node.replace(/[^a-zA-Z0-9_.-]/g, '-')}`,
      Labels: { [LABELS.managed]: 'true', [LABELS.role]: 'proxy', [LABELS.node]: node, [SPEC_LABEL]: specHash },
    };
  }

  private async create(spec: Docker.ContainerCreateOptions): Promise<void> {
    await mkdir(this.paths.dataDir, { recursive: true });
    await mkdir(this.paths.socketDir, { recursive: true });
    await ensureNetwork(this.options.docker, this.options.network);
    try {
      const container = await this.options.docker.createContainer(spec);
      await container.start();
    } catch (error) {
      throw new ProxyError('PROXY_CONTAINER_FAILED', `proxy container ${spec.name}: ${(error as Error).message}`, { cause: error });
    }
  }

  private async waitReady(): Promise<void> {
    const deadline = Date.now() + (this.options.readyTimeoutMs ?? 15_000);
    let lastError: unknown;
    while (Date.now() < deadline) {
      try {
        await this.options.probe();
        return;
      } catch (error) {
        lastError = error;
      }
      await sleep(100);
    }
    throw new ProxyError('PROXY_CONTAINER_FAILED', `proxy container started but its admin API did not answer: ${(lastError as Error)?.message}`, { cause: lastError });
  }
}
