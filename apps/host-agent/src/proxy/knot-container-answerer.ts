import { createHash } from 'node:crypto';
import type { Logger } from '@tether/common';
import type Docker from 'dockerode';
import { LABELS } from '../docker/docker-client.js';
import type { ContainerRuntime, ContainerSpec } from '../runtime/container-runtime.js';
import { KnotSupervision } from './answerer.js';
import { canonicalJson } from './canonical-json.js';
import { execIn } from './docker-exec.js';
import { ProxyError } from './errors.js';
import { knotPaths, prepareKnotFiles } from './knot-files.js';
import { ANSWER_ZONE } from './static-answers.js';

// The answerer in container mode (docs/architecture.md, "Static proxy"):
// knotd in its own container, `tether-answerer-<node>`, started in the Caddy
// container's network namespace (`NetworkMode: container:<caddy>`), so
// Caddy's resolver is `udp/127.0.0.1:<port>` for as long as the settings
// stay: the address in Caddy's static config never moves, whoever restarts.
// Its folder (config, zone, control socket) is bind-mounted at the same path
// inside, the way the Caddy container mounts the agent's state folder. The
// agent probes knotd at the Caddy container's address on Tether's network (as
// the canary reaches Caddy), reloads the zone with `docker exec knotc`, and
// replaces the container when it does not answer: killed, frozen, or left in
// the namespace of a Caddy container that was restarted or recreated.

const SPEC_LABEL = 'tether.answerer-spec';
const ROLE = 'answerer';
/** Inside the container, not shared: pid file and control socket (knot-image.ts makes it). */
export const KNOT_RUN_DIR = '/run/knot';

/** What the answerer needs of the Caddy container it lives beside (caddy-container.ts). */
export interface AnswererHost {
  ensure(): Promise<void>;
  running(): Promise<{ id: string; address: string | null } | null>;
}

export interface KnotContainerAnswererOptions {
  runtime: ContainerRuntime;
  /** For `docker exec` (the zone reload). */
  docker: Docker;
  node: string;
  /** The answerer's folder: a host path, mounted at the same path inside (the agent's state folder is). */
  dir: string;
  /** Port knotd listens on in the Caddy container's namespace (TETHER_PROXY_ANSWERER_LISTEN's). */
  port: number;
  /** Resolves the image tag (building the image when missing). */
  image: () => Promise<string>;
  /** uid:gid knotd runs as (the agent's, like Caddy's): the files it makes stay the agent's. */
  user: string;
  proxy: AnswererHost;
  probeTimeoutMs: number;
  startTimeoutMs?: number;
  /** Bound on one `docker exec knotc zone-reload`. */
  reloadTimeoutMs?: number;
  logger: Logger;
}

export class KnotContainerAnswerer extends KnotSupervision {
  /** Where the last probe went: the Caddy container's address (re-read on every replace). */
  private target: { id: string; address: string } | null = null;
  /** The running container was checked against the current settings in this agent run. */
  private verified = false;

  constructor(private readonly options: KnotContainerAnswererOptions) {
    super(knotPaths(options.dir, KNOT_RUN_DIR), options);
  }

  get caddyAddress(): string {
    return `udp/127.0.0.1:${this.options.port}`;
  }

  get containerName(): string {
    return `tether-answerer-${this.options.node.replace(/[^a-zA-Z0-9_.-]/g, '-')}`;
  }

  protected async probeTarget(): Promise<{ host: string; port: number }> {
    this.target ??= await this.caddy();
    return { host: this.target.address, port: this.options.port };
  }

  private async caddy(): Promise<{ id: string; address: string }> {
    const running = await this.options.proxy.running();
    if (!running?.address) throw new ProxyError('PROXY_ANSWERER_FAILED', 'no proxy container runs: the answerer lives in its network namespace');
    return { id: running.id, address: running.address };
  }

  protected override async current(): Promise<boolean> {
    if (this.verified) return true;
    try {
      const caddy = await this.caddy();
      const want = this.spec(await this.options.image(), caddy.id).labels[SPEC_LABEL];
      const running = (await this.list()).filter((c) => c.state === 'running');
      this.verified = running.length === 1 && running[0]!.labels[SPEC_LABEL] === want;
      return this.verified;
    } catch (error) {
      // Answering is what counts: an image or Docker failure now must not take a working answerer down.
      this.options.logger.warn({ err: error }, 'answerer settings not checked; keeping the one that answers');
      return true;
    }
  }

  protected async replace(): Promise<void> {
    const { runtime, logger } = this.options;
    await this.options.proxy.ensure();
    this.target = await this.caddy();
    await prepareKnotFiles(this.paths, { host: '0.0.0.0', port: this.options.port });
    let spec: ContainerSpec;
    try {
      spec = this.spec(await this.options.image(), this.target.id);
    } catch (error) {
      throw new ProxyError('PROXY_ANSWERER_FAILED', `answerer image: ${(error as Error).message}`, { cause: error });
    }
    try {
      // Removed whatever its state (a paused or wedged knotd, one in a dead namespace): a new one starts clean.
      for (const c of await this.list()) await runtime.remove(c.id);
      await runtime.start(await runtime.create(spec));
    } catch (error) {
      throw new ProxyError('PROXY_ANSWERER_FAILED', `answerer container ${spec.name}: ${(error as Error).message}`, { cause: error });
    }
    this.verified = true;
    logger.info({ container: spec.name, proxy: this.target.id.slice(0, 12) }, 'answerer container started');
    await this.waitAnswering(`${spec.name} at ${this.target.address}:${this.options.port}`);
  }

  protected async reload(): Promise<void> {
    const running = (await this.list()).find((c) => c.state === 'running');
    if (!running) throw new Error('no answerer container runs');
    const result = await execIn(
      this.options.docker,
      running.id,
      ['/usr/sbin/knotc', '-s', this.paths.socket, '-b', '-t', '5', 'zone-reload', ANSWER_ZONE],
      this.options.reloadTimeoutMs ?? 10_000,
    );
    if (result.exitCode !== 0) throw Object.assign(new Error(`knotc exited with ${result.exitCode}`), { stdout: result.output });
  }

  async destroy(): Promise<void> {
    for (const c of await this.list()) await this.options.runtime.remove(c.id);
  }

  /** This node's answerer containers, running or not. */
  list() {
    return this.options.runtime.list({ [LABELS.managed]: 'true', [LABELS.role]: ROLE, [LABELS.node]: this.options.node });
  }

  private spec(image: string, caddyId: string): ContainerSpec {
    const { node, user, dir, port } = this.options;
    const settings = { image, user, network: `container:${caddyId}`, binds: [`${dir}:${dir}`], cmd: ['-c', this.paths.conf], port, restart: 'unless-stopped' };
    const specHash = createHash('sha256').update(canonicalJson(settings)).digest('hex').slice(0, 16);
    return {
      name: this.containerName,
      image,
      env: {},
      labels: { [LABELS.managed]: 'true', [LABELS.role]: ROLE, [LABELS.node]: node, [SPEC_LABEL]: specHash },
      network: settings.network,
      aliases: [],
      exposedPort: null,
      user,
      cmd: settings.cmd,
      binds: settings.binds,
      // Docker brings a crashed knotd back (and after a host reboot) even while the agent is down.
      restartPolicy: 'unless-stopped',
    };
  }
}
