import type Docker from 'dockerode';
import { ensureNetwork, labelFilter, withSignal } from '../docker/docker-client.js';
import { subscribeEvents } from './docker-events.js';
import type {
  CallOptions,
  ContainerDetails,
  ContainerRuntime,
  ContainerSpec,
  ContainerSummary,
  EngineState,
  EventHandlers,
  EventSubscription,
  HealthState,
  RegistryAuth,
  VolumeSummary,
} from './container-runtime.js';
import { RUNTIME_ERROR_CODES, RuntimeError, toRuntimeError, type RuntimeSubject } from './errors.js';
import { demuxLogs, parseJsonLines } from '../docker/docker-streams.js';
import type { PortBinding } from './published-port.js';
import { CONTAINER_LOG_DEFAULTS, type ContainerLogOptions } from './settings.js';

export interface DockerRuntimeOptions {
  /** Bound on every API call except pulls, stops (grace added) and the event stream. */
  callTimeoutMs: number;
  /** json-file rotation for every container created; CONTAINER_LOG_DEFAULTS when absent. */
  containerLogs?: ContainerLogOptions;
}

const NEVER = '0001-01-01T00:00:00Z';
const timestamp = (value: string | undefined): string | null => (!value || value.startsWith('0001-') || value === NEVER ? null : value);

function healthOf(value: string | undefined): HealthState {
  return value === 'starting' || value === 'healthy' || value === 'unhealthy' ? value : 'none';
}

function exposedPorts(spec: ContainerSpec): Record<string, object> | undefined {
  const ports = [...(spec.exposedPort === null ? [] : [`${spec.exposedPort}/tcp`]), ...Object.keys(spec.publish ?? {})];
  return ports.length === 0 ? undefined : Object.fromEntries(ports.map((port) => [port, {}]));
}

/** Docker's `{ "8080/tcp": [{ HostIp, HostPort }] }` (null for a port exposed but not published) as rows. */
function portBindings(ports: Record<string, { HostIp: string; HostPort: string }[] | null> | undefined): PortBinding[] {
  return Object.entries(ports ?? {}).flatMap(([containerPort, bindings]) =>
    (bindings ?? []).map((b) => ({ containerPort, hostIp: b.HostIp, hostPort: Number(b.HostPort) })).filter((b) => Number.isInteger(b.hostPort) && b.hostPort > 0),
  );
}

const logConfig = (o: ContainerLogOptions) => ({ 'max-size': o.maxSize, 'max-file': String(o.maxFile) });

/** ContainerRuntime over the Docker Engine API (dockerode). Every call is bounded; every failure is a RuntimeError. */
export class DockerContainerRuntime implements ContainerRuntime {
  constructor(
    private readonly docker: Docker,
    private readonly options: DockerRuntimeOptions,
  ) {}

  /** Runs one API call under a timeout and maps its failure. */
  private async call<T>(operation: string, subject: RuntimeSubject, fn: (signal: AbortSignal) => Promise<T>, timeoutMs = this.options.callTimeoutMs): Promise<T> {
    try {
      return await fn(AbortSignal.timeout(timeoutMs));
    } catch (err) {
      throw toRuntimeError(err, operation, subject, timeoutMs);
    }
  }

  async list(labels: Record<string, string>, options: CallOptions = {}): Promise<ContainerSummary[]> {
    const rows = await this.call(
      'list containers',
      'daemon',
      (abortSignal) => this.docker.listContainers(withSignal<Docker.ContainerListOptions>(abortSignal, { all: true, filters: { label: labelFilter(labels) } })),
      options.timeoutMs,
    );
    return rows.map((row) => ({
      id: row.Id,
      name: (row.Names[0] ?? row.Id).replace(/^\//, ''),
      labels: row.Labels ?? {},
      state: row.State as EngineState,
      status: row.Status,
    }));
  }

  async inspect(id: string, options: CallOptions = {}): Promise<ContainerDetails> {
    const info = await this.call(`inspect container ${id}`, 'container', (abortSignal) => this.docker.getContainer(id).inspect(withSignal<Docker.ContainerInspectOptions>(abortSignal)), options.timeoutMs);
    const health = info.State.Health as { Status?: string; Log?: { ExitCode: number; Output: string }[] } | undefined;
    const lastProbe = health?.Log?.at(-1);
    const test = info.Config.Healthcheck?.Test ?? [];
    return {
      id: info.Id,
      name: info.Name.replace(/^\//, ''),
      labels: info.Config.Labels ?? {},
      state: info.State.Status as EngineState,
      exitCode: info.State.Status === 'exited' || info.State.Status === 'dead' ? info.State.ExitCode : null,
      oomKilled: info.State.OOMKilled,
      error: info.State.Error || null,
      health: healthOf(health?.Status),
      lastHealthOutput: lastProbe ? `exit ${lastProbe.ExitCode}${lastProbe.Output.trim() ? `: ${lastProbe.Output.trim()}` : ''}` : null,
      restartCount: info.RestartCount,
      createdAt: info.Created,
      startedAt: timestamp(info.State.StartedAt),
      finishedAt: timestamp(info.State.FinishedAt),
      hasHealthcheck: test.length > 0 && test[0] !== 'NONE',
      ipAddresses: Object.fromEntries(
        Object.entries(info.NetworkSettings?.Networks ?? {})
          .filter(([, n]) => Boolean(n?.IPAddress))
          .map(([name, n]) => [name, n.IPAddress]),
      ),
      ports: portBindings(info.NetworkSettings?.Ports),
    };
  }

  async create(spec: ContainerSpec): Promise<string> {
    try {
      return await this.createContainer(spec);
    } catch (err) {
      const e = err as RuntimeError;
      // Create answers 404 for a missing image and for a missing network alike.
      if (e.statusCode === 404 && /network/i.test(e.daemonMessage ?? '')) {
        throw new RuntimeError(RUNTIME_ERROR_CODES.NETWORK_NOT_FOUND, e.message, { daemonMessage: e.daemonMessage, statusCode: 404, cause: err });
      }
      throw err;
    }
  }

  private async createContainer(spec: ContainerSpec): Promise<string> {
    const container = await this.call(`create container ${spec.name}`, 'image', (abortSignal) =>
      this.docker.createContainer(withSignal<Docker.ContainerCreateOptions>(abortSignal, {
        name: spec.name,
        Image: spec.image,
        Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
        Labels: spec.labels,
        ExposedPorts: exposedPorts(spec),
        ...(spec.user === undefined ? {} : { User: spec.user }),
        ...(spec.entrypoint === undefined ? {} : { Entrypoint: spec.entrypoint }),
        ...(spec.cmd === undefined ? {} : { Cmd: spec.cmd }),
        HostConfig: {
          NetworkMode: spec.network,
          // The agent owns service restarts (budget, backoff, reporting); Docker must not restart behind their back.
          RestartPolicy: { Name: spec.restartPolicy ?? 'no' },
          // Without a bound, json-file logs grow until the disk is full. Not part of the spec hash: adopted containers keep theirs.
          LogConfig: { Type: 'json-file', Config: logConfig(this.options.containerLogs ?? CONTAINER_LOG_DEFAULTS) },
          ...(spec.publish === undefined
            ? {}
            : { PortBindings: Object.fromEntries(Object.entries(spec.publish).map(([port, p]) => [port, [{ HostIp: p.hostIp, HostPort: p.hostPort === undefined ? '' : String(p.hostPort) }]])) }),
          ...(spec.binds === undefined ? {} : { Binds: spec.binds }),
          ...(spec.sysctls === undefined ? {} : { Sysctls: spec.sysctls }),
          ...(spec.nanoCpus === undefined ? {} : { NanoCpus: spec.nanoCpus }),
          // Swap equal to memory: without it the kernel swaps past the limit instead of holding it.
          ...(spec.memoryBytes === undefined ? {} : { Memory: spec.memoryBytes, MemorySwap: spec.memoryBytes }),
          ...(spec.volumes === undefined ? {} : { Mounts: spec.volumes.map((v) => ({ Type: 'volume' as const, Source: v.source, Target: v.target, ReadOnly: v.readOnly })) }),
        },
        // `container:<id>` joins another container's network namespace: no endpoint of its own.
        ...(spec.network.startsWith('container:') ? {} : { NetworkingConfig: { EndpointsConfig: { [spec.network]: spec.aliases.length > 0 ? { Aliases: spec.aliases } : {} } } }),
      })),
    );
    return container.id;
  }

  async start(id: string): Promise<void> {
    try {
      await this.call(`start container ${id}`, 'container', (abortSignal) => this.docker.getContainer(id).start(withSignal<Docker.ContainerStartOptions>(abortSignal)));
    } catch (err) {
      const e = err as RuntimeError;
      // 304: already running, which is what was asked.
      if (e.statusCode === 304) return;
      if (e.code === RUNTIME_ERROR_CODES.DOCKER_ERROR) {
        throw new RuntimeError(RUNTIME_ERROR_CODES.START_FAILED, `could not start: ${e.daemonMessage ?? e.message}`, { daemonMessage: e.daemonMessage, statusCode: e.statusCode, cause: err });
      }
      throw err;
    }
  }

  async stop(id: string, graceMs: number): Promise<void> {
    const t = Math.max(0, Math.ceil(graceMs / 1000));
    try {
      await this.call(`stop container ${id}`, 'container', (abortSignal) => this.docker.getContainer(id).stop(withSignal<Docker.ContainerStopOptions>(abortSignal, { t })), graceMs + this.options.callTimeoutMs);
    } catch (err) {
      const e = err as RuntimeError;
      if (e.statusCode === 304 || e.code === RUNTIME_ERROR_CODES.CONTAINER_NOT_FOUND) return;
      throw err;
    }
  }

  async remove(id: string): Promise<void> {
    try {
      await this.call(`remove container ${id}`, 'container', (abortSignal) => this.docker.getContainer(id).remove(withSignal<Docker.ContainerRemoveOptions>(abortSignal, { force: true, v: true })));
    } catch (err) {
      const e = err as RuntimeError;
      if (e.code === RUNTIME_ERROR_CODES.CONTAINER_NOT_FOUND) return;
      if (e.code === RUNTIME_ERROR_CODES.DOCKER_CONFLICT && /already in progress/i.test(e.message)) return;
      throw err;
    }
  }

  async imagePresent(image: string): Promise<boolean> {
    return (await this.imageId(image)) !== null;
  }

  async imageId(image: string): Promise<string | null> {
    return (await this.imageIdentity(image))?.id ?? null;
  }

  async imageIdentity(image: string): Promise<{ id: string; repoDigests: string[] } | null> {
    try {
      const info = await this.call(`inspect image ${image}`, 'image', (abortSignal) => this.docker.getImage(image).inspect(withSignal<Docker.ImageInspectOptions>(abortSignal)));
      return { id: info.Id, repoDigests: info.RepoDigests ?? [] };
    } catch (err) {
      if ((err as RuntimeError).code === RUNTIME_ERROR_CODES.IMAGE_NOT_FOUND) return null;
      throw err;
    }
  }

  async pull(image: string, timeoutMs: number, auth?: RegistryAuth): Promise<void> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    const fail = (message: string, daemonMessage: string | null, cause?: unknown) =>
      new RuntimeError(RUNTIME_ERROR_CODES.IMAGE_PULL_FAILED, message, { daemonMessage, cause });
    try {
      // dockerode sends `authconfig` as X-Registry-Auth; the credentials go nowhere else (never into a message).
      const stream = await this.docker.pull(image, withSignal<object>(controller.signal, auth ? { authconfig: auth } : {}));
      // A pull answers 200 at once and reports failure inside the progress stream.
      await parseJsonLines(stream, (line) => {
        const error = (line as { error?: unknown }).error;
        if (typeof error === 'string') throw fail(`pull of ${image} failed: ${error}`, error);
      });
    } catch (err) {
      if (controller.signal.aborted) throw fail(`pull of ${image} did not finish within ${timeoutMs} ms`, `no answer from the registry within ${timeoutMs} ms`, err);
      if (err instanceof RuntimeError) throw err;
      const mapped = toRuntimeError(err, `pull ${image}`, 'image');
      if (mapped.code === RUNTIME_ERROR_CODES.RUNTIME_UNAVAILABLE) throw mapped;
      throw fail(`pull of ${image} failed: ${mapped.daemonMessage ?? mapped.message}`, mapped.daemonMessage, err);
    } finally {
      clearTimeout(timer);
    }
  }

  async ensureNetwork(name: string): Promise<void> {
    await this.call(`ensure network ${name}`, 'network', (signal) => raceSignal(ensureNetwork(this.docker, name), signal));
  }

  async joinAliases(id: string, network: string, aliases: string[]): Promise<void> {
    const net = this.docker.getNetwork(network);
    await this.call(`disconnect container ${id} from ${network}`, 'container', (abortSignal) => net.disconnect(withSignal<object>(abortSignal, { Container: id, Force: false })));
    await this.call(`connect container ${id} to ${network}`, 'container', (abortSignal) => net.connect(withSignal<object>(abortSignal, { Container: id, EndpointConfig: { Aliases: aliases } })));
  }

  async ensureVolume(name: string, labels: Record<string, string>): Promise<void> {
    // Creating a volume that exists answers with the existing one: its data (and labels) stay.
    await this.call(`create volume ${name}`, 'volume', (abortSignal) => this.docker.createVolume(withSignal<object>(abortSignal, { Name: name, Labels: labels })));
  }

  async listVolumes(labels: Record<string, string>): Promise<VolumeSummary[]> {
    const answer = await this.call('list volumes', 'daemon', (abortSignal) => this.docker.listVolumes(withSignal<object>(abortSignal, { filters: { label: labelFilter(labels) } })));
    return (answer.Volumes ?? []).map((v) => ({ name: v.Name, labels: v.Labels ?? {}, createdAt: (v as { CreatedAt?: string }).CreatedAt ?? null, mountpoint: v.Mountpoint || null }));
  }

  async removeVolume(name: string): Promise<void> {
    try {
      await this.call(`remove volume ${name}`, 'volume', (abortSignal) => this.docker.getVolume(name).remove(withSignal<object>(abortSignal)));
    } catch (err) {
      if ((err as RuntimeError).statusCode === 404) return;
      throw err;
    }
  }

  async logsTail(id: string, lines: number): Promise<string> {
    const raw = await this.call(`logs of ${id}`, 'container', (abortSignal) =>
      this.docker.getContainer(id).logs(withSignal<Docker.ContainerLogsOptions & { follow: false }>(abortSignal, { stdout: true, stderr: true, tail: lines, follow: false })),
    );
    return demuxLogs(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw)));
  }

  events(labels: Record<string, string>, handlers: EventHandlers): EventSubscription {
    return subscribeEvents(this.docker, labels, handlers, this.options.callTimeoutMs);
  }
}

/** Rejects when `signal` aborts, for calls that cannot take a signal themselves. */
function raceSignal<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
