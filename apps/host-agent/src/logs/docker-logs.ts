import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { LABELS } from '../docker/docker-client.js';
import { parseJsonLines } from '../docker/docker-streams.js';

// What a log stream needs from Docker: the service's containers on this node,
// one container's log output as a byte stream (multiplexed frames), and the
// start events of the service's containers (a redeploy's new ones).

export interface ServiceContainer {
  id: string;
  /** The container's name: one per replica. */
  name: string;
  createdAt: number;
}

export interface LogSourceOptions {
  /** Last N lines; undefined: all. */
  tail?: number;
  /** Docker `since` (seconds.nanoseconds). */
  since?: string;
  follow: boolean;
}

export interface LogSource {
  containers(serviceId: string): Promise<ServiceContainer[]>;
  /** A readable of multiplexed log frames with timestamps; ends when the container stops (follow) or the lines are out. */
  open(containerId: string, options: LogSourceOptions, signal: AbortSignal): Promise<Readable>;
  /** Calls `onStart` with each container of the service that starts from now on; resolves when the signal aborts or Docker ends the stream. */
  watchStarts(serviceId: string, onStart: (container: ServiceContainer) => void, signal: AbortSignal): Promise<void>;
}

export class DockerLogSource implements LogSource {
  constructor(
    private readonly docker: Docker,
    private readonly node: string,
  ) {}

  private filters(serviceId: string) {
    return { label: [`${LABELS.service}=${serviceId}`, `${LABELS.node}=${this.node}`] };
  }

  async containers(serviceId: string): Promise<ServiceContainer[]> {
    const rows = await this.docker.listContainers({ all: true, filters: this.filters(serviceId), abortSignal: AbortSignal.timeout(10_000) } as Docker.ContainerListOptions);
    return rows
      .map((row) => ({ id: row.Id, name: (row.Names[0] ?? row.Id).replace(/^\//, ''), createdAt: row.Created }))
      .sort((a, b) => a.createdAt - b.createdAt || a.name.localeCompare(b.name));
  }

  open(containerId: string, options: LogSourceOptions, signal: AbortSignal): Promise<Readable> {
    const query: Record<string, unknown> = { follow: options.follow, stdout: true, stderr: true, timestamps: true };
    if (options.tail !== undefined) query.tail = options.tail;
    if (options.since !== undefined) query.since = options.since;
    return new Promise((resolve, reject) => {
      this.docker.modem.dial(
        {
          path: `/containers/${encodeURIComponent(containerId)}/logs?`,
          method: 'GET',
          isStream: true,
          abortSignal: signal,
          statusCodes: { 200: true, 404: 'no such container', 500: 'server error' },
          options: query,
        } as Parameters<Docker['modem']['dial']>[0],
        (err: unknown, stream: unknown) => (err ? reject(err) : resolve(stream as Readable)),
      );
    });
  }

  async watchStarts(serviceId: string, onStart: (container: ServiceContainer) => void, signal: AbortSignal): Promise<void> {
    let stream: Readable;
    try {
      stream = (await this.docker.getEvents({
        filters: { type: ['container'], event: ['start'], ...this.filters(serviceId) },
        abortSignal: signal,
      } as Docker.GetEventsOptions)) as unknown as Readable;
    } catch {
      // Docker is away: the stream's history or readers fail and end it with DOCKER_UNAVAILABLE.
      return;
    }
    const stop = () => stream.destroy();
    signal.addEventListener('abort', stop, { once: true });
    try {
      await parseJsonLines(stream, (value) => {
        const event = value as { id?: string; Actor?: { Attributes?: Record<string, string> }; time?: number };
        if (!event.id) return;
        onStart({ id: event.id, name: event.Actor?.Attributes?.name ?? event.id, createdAt: event.time ?? 0 });
      });
    } catch {
      // Aborted, or Docker went away: the stream's readers end on their own.
    } finally {
      signal.removeEventListener('abort', stop);
    }
  }
}
