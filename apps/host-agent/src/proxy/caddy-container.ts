import { sleep, type Logger } from '@tether/common';
import { createHash } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { LABELS } from '../docker/docker-client.js';
import type { ContainerRuntime, ContainerSpec } from '../runtime/container-runtime.js';
import { canonicalJson } from './canonical-json.js';
import { CADDY_CONTAINER } from './caddy-image.js';
import { ProxyError } from './errors.js';
import type { ProxyTlsMode } from './render.js';
import type { ProxySupervisor } from './configurator.js';

// Container mode: the agent runs Caddy itself, on Tether's Docker network so
// upstreams are the services' stable aliases. Every Docker call goes through
// the container runtime, so each is bounded and fails with a coded error. Supervision only keeps the
// process there; a Caddy that was recreated or restarted boots with its
// bootstrap config (admin API only), and the controller's next check sees
// "differs" and loads the routes again.

/** Label holding a hash of the container's settings: other settings (image, ports) mean recreate. */
const SPEC_LABEL = 'tether.proxy-spec';

export interface CaddyContainerOptions {
  runtime: ContainerRuntime;
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
  /** More host folders to mount (`host:container[:ro]`): static routing's answer files. */
  extraBinds?: string[];
  /** Resolves once Caddy's admin API answers. */
  probe: () => Promise<unknown>;
  logger: Logger;
  /** How long a started container may take until its admin API answers. */
  readyTimeoutMs?: number;
  /** Upper bound of one ensure() (image build, Docker calls, readiness). */
  ensureTimeoutMs?: number;
}

/** Host paths of the folders shared with the container, and of the admin socket. */
/** The agent's folder for its Caddy container (bind-mounted data and admin socket). */
export function caddyHostDir(stateDir: string): string {
  return path.join(stateDir, 'caddy');
}

export function caddyHostPaths(hostDir: string) {
  const socketDir = path.join(hostDir, 'run');
  return { dataDir: path.join(hostDir, 'data'), socketDir, socketPath: path.join(socketDir, 'admin.sock') };
}

function proxyContainers(runtime: ContainerRuntime, node: string) {
  return runtime.list({ [LABELS.managed]: 'true', [LABELS.role]: 'proxy', [LABELS.node]: node });
}

/**
 * This node's running proxy container, its id and its address on Tether's network; null while none runs. A
 * function of the runtime alone, so what needs the address (the canary, route probes) is made before the routing
 * controller that supervises the container.
 */
export async function runningProxy(runtime: ContainerRuntime, node: string, network: string): Promise<{ id: string; address: string | null } | null> {
  const running = (await proxyContainers(runtime, node)).find((c) => c.state === 'running');
  if (!running) return null;
  return { id: running.id, address: (await runtime.inspect(running.id)).ipAddresses?.[network] ?? null };
}

export class CaddyContainer implements ProxySupervisor {
  private readonly paths: ReturnType<typeof caddyHostPaths>;
  private inFlight: Promise<void> | null = null;
  /** A container was created since the controller last asked: its first load is `initial`. */
  private created = false;

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
    const { runtime, logger } = this.options;
    let spec: ContainerSpec;
    try {
      spec = this.spec(await this.options.image());
    } catch (error) {
      throw new ProxyError('PROXY_CONTAINER_FAILED', `caddy image: ${(error as Error).message}`, { cause: error });
    }
    const specHash = spec.labels[SPEC_LABEL];
    const found = await this.list();
    const keep = found.find((c) => c.labels[SPEC_LABEL] === specHash);
    for (const c of found) {
      if (c === keep) continue;
      logger.warn({ container: c.id }, 'removing proxy container with outdated settings');
      // A container already gone or being removed is not an error (see ContainerRuntime.remove).
      await runtime.remove(c.id);
    }
    if (!keep) {
      await this.create(spec);
      this.created = true;
      logger.info({ node: this.options.node }, 'proxy container created');
    } else if (keep.state !== 'running' && keep.state !== 'restarting') {
      await runtime.start(keep.id);
      logger.warn({ container: keep.id, state: keep.state }, 'proxy container was not running; started');
    } else {
      return;
    }
    await this.waitReady();
  }

  takeCreated(): boolean {
    const created = this.created;
    this.created = false;
    return created;
  }

  /**
   * The running proxy container's address on Tether's network: how the
   * canary reaches Caddy's canary server, from the host (Linux routes to a
   * bridge network's addresses) or from a container on that network, without
   * publishing a port. Null while no proxy container runs.
   */
  async address(): Promise<string | null> {
    return (await this.running())?.address ?? null;
  }

  /** The running proxy container's id and address on Tether's network (the answerer joins its network namespace). */
  running(): Promise<{ id: string; address: string | null } | null> {
    return runningProxy(this.options.runtime, this.options.node, this.options.network);
  }

  /** Removes the proxy container (decommissioning a node; tests). An agent stop leaves it running. */
  async remove(): Promise<void> {
    for (const c of await this.list()) await this.options.runtime.remove(c.id);
  }

  private list() {
    return proxyContainers(this.options.runtime, this.options.node);
  }

  private spec(image: string): ContainerSpec {
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
        Binds: [`${this.paths.dataDir}:${CADDY_CONTAINER.dataDir}`, `${this.paths.socketDir}:${CADDY_CONTAINER.socketDir}`, ...(this.options.extraBinds ?? [])],
        // Docker brings Caddy back after a crash or a host reboot even before the agent runs again.
        RestartPolicy: { Name: 'unless-stopped' },
        // Lets Caddy bind 80 and 443 in its own network namespace without running as root.
        Sysctls: { 'net.ipv4.ip_unprivileged_port_start': '0' },
      },
      NetworkingConfig: { EndpointsConfig: { [network]: {} } },
    };
    // The hash is of Docker's own create settings, so a container made by an earlier agent keeps matching.
    const specHash = createHash('sha256').update(canonicalJson(settings)).digest('hex').slice(0, 16);
    return {
      name: `tether-proxy-${node.replace(/[^a-zA-Z0-9_.-]/g, '-')}`,
      image,
      env: {},
      labels: { [LABELS.managed]: 'true', [LABELS.role]: 'proxy', [LABELS.node]: node, [SPEC_LABEL]: specHash },
      network,
      aliases: [],
      exposedPort: null,
      user,
      publish: Object.fromEntries(Object.entries(ports).map(([port, [binding]]) => [port, { hostIp: binding!.HostIp, hostPort: Number(binding!.HostPort) }])),
      binds: settings.HostConfig.Binds,
      restartPolicy: 'unless-stopped',
      sysctls: settings.HostConfig.Sysctls,
    };
  }

  private async create(spec: ContainerSpec): Promise<void> {
    await mkdir(this.paths.dataDir, { recursive: true });
    await mkdir(this.paths.socketDir, { recursive: true });
    for (const bind of this.options.extraBinds ?? []) await mkdir(bind.split(':')[0] as string, { recursive: true });
    const { runtime } = this.options;
    await runtime.ensureNetwork(this.options.network);
    try {
      await runtime.start(await runtime.create(spec));
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
