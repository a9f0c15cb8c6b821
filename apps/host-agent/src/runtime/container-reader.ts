import type { ContainerState } from '@tether/protocol';
import { LABELS } from '../docker/docker-client.js';
import type { ContainerDetails, ContainerRuntime } from './container-runtime.js';
import { RUNTIME_ERROR_CODES, type RuntimeError } from './errors.js';
import type { ActualContainer } from './plan.js';
import { identityOf, nodeSelector } from './workload-spec.js';

/** One container as read now: the engine's details plus the Tether identity from its labels. */
export interface ReadContainer {
  actual: ActualContainer;
  details: ContainerDetails;
}

const ms = (iso: string | null): number | null => (iso === null ? null : Date.parse(iso));

/**
 * Reads this node's containers: one list call, and an inspect only for a
 * container whose details are not cached. A cached entry is trusted only
 * while the event stream has been open since it was read (any event for the
 * container drops it) and while the listed state still matches; otherwise it
 * is read again. So a heartbeat costs one list call in steady state and never
 * reports what was last asked for.
 */
export class ContainerReader {
  private readonly cache = new Map<string, ContainerDetails>();
  /** Bumped by every invalidation, so an inspect that raced an event is not cached. */
  private readonly generation = new Map<string, number>();
  private trusted = false;

  constructor(
    private readonly runtime: ContainerRuntime,
    private readonly node: string,
  ) {}

  /** The event stream opened (true) or closed (false); either way, what was cached may have changed unseen. */
  setTrusted(open: boolean): void {
    this.trusted = open;
    this.cache.clear();
  }

  invalidate(id: string): void {
    this.cache.delete(id);
    this.generation.set(id, (this.generation.get(id) ?? 0) + 1);
  }

  /** Every container of this node (or of one service), bounded by `timeoutMs` overall. */
  async read(timeoutMs: number, serviceId?: string): Promise<ReadContainer[]> {
    const deadline = Date.now() + timeoutMs;
    const remaining = () => Math.max(1, deadline - Date.now());
    const labels = serviceId === undefined ? nodeSelector(this.node) : { ...nodeSelector(this.node), [LABELS.service]: serviceId };
    const rows = await this.runtime.list(labels, { timeoutMs });
    const read = await Promise.all(
      rows.map(async (row): Promise<ReadContainer | null> => {
        const identity = identityOf(row.labels);
        if (!identity) return null;
        let details = this.trusted ? this.cache.get(row.id) : undefined;
        if (!details || details.state !== row.state) {
          const generation = this.generation.get(row.id) ?? 0;
          try {
            details = await this.runtime.inspect(row.id, { timeoutMs: remaining() });
          } catch (err) {
            // Removed between the list and the inspect: it is gone, not unknown.
            if ((err as RuntimeError).code === RUNTIME_ERROR_CODES.CONTAINER_NOT_FOUND) return null;
            throw err;
          }
          if (this.trusted && (this.generation.get(row.id) ?? 0) === generation) this.cache.set(row.id, details);
        }
        const actual: ActualContainer = {
          id: row.id,
          name: row.name,
          ...identity,
          state: details.state,
          exitCode: details.exitCode,
          health: details.health,
          createdAt: Date.parse(details.createdAt),
          startedAt: ms(details.startedAt),
          finishedAt: ms(details.finishedAt),
          oomKilled: details.oomKilled,
          ...(details.ports && details.ports.length > 0 ? { ports: details.ports } : {}),
        };
        return { actual, details };
      }),
    );
    if (serviceId === undefined) {
      const present = new Set(rows.map((r) => r.id));
      for (const id of this.cache.keys()) if (!present.has(id)) this.cache.delete(id);
      for (const id of this.generation.keys()) if (!present.has(id)) this.generation.delete(id);
    }
    return read.filter((r): r is ReadContainer => r !== null);
  }
}

/** The heartbeat's view of one container. `agentRestarts` adds the restarts the agent made to Docker's own count. */
export function toContainerState({ actual, details }: ReadContainer, agentRestarts: number): ContainerState {
  const live = actual.state === 'running' || actual.state === 'restarting' || actual.state === 'paused';
  const ended = actual.state === 'exited' || actual.state === 'dead';
  const since = (live ? details.startedAt : ended ? (details.finishedAt ?? details.startedAt) : null) ?? details.createdAt;
  return {
    containerId: actual.id,
    serviceId: actual.serviceId,
    deploymentId: actual.deploymentId,
    name: actual.name,
    state: actual.state,
    exitCode: ended ? actual.exitCode : null,
    health: actual.health,
    restartCount: details.restartCount + agentRestarts,
    since: new Date(Date.parse(since)).toISOString(),
    // Docker's flag for the last exit: reset when the container starts again (restartCount keeps the count).
    ...(ended && details.oomKilled ? { oomKilled: true } : {}),
    // Only containers an allocations set placed carry it, so only a session that agreed on workload.allocations sees it.
    ...(actual.allocationId ? { allocationId: actual.allocationId } : {}),
  };
}
