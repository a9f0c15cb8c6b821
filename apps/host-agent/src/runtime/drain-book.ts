import type { Logger } from '@tether/common';
import { readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';

/**
 * Drains in progress (docs/architecture.md, "Drain"): the old containers a rollout switched away from,
 * with their deadline. Docker labels cannot change after a container is created, so the deadline lives
 * here, in TETHER_STATE_DIR/drains.json (written atomically before the deployment reports `running`):
 * after an agent restart the containers stay out of the answers and are stopped at their deadline, not
 * before and not never.
 */
export interface DrainRecord {
  /** The deployment whose rollout switched (its `deploy.drained` reports this drain). */
  deploymentId: string;
  serviceId: string;
  /** The old containers: out of the answers, stopped and removed when the drain ends. */
  containers: { id: string; name: string }[];
  /** Epoch ms of the switch. */
  switchedAt: number;
  /** Epoch ms: stopped at the latest then (switch + drainSeconds). */
  deadline: number;
  /** Open on them at the switch; null when the proxy cannot count per container. */
  openAtSwitch: number | null;
  /**
   * The allocations whose rollout switched (capability allocations.drain: its end is `allocations.drained`); absent
   * for a deploy's drain and for a removed allocation's (never reported as a deployment's drain).
   */
  allocationIds?: string[];
}

/** A container is in one drain at most (plan() leaves draining containers alone): its first container names a drain. */
const keyOf = (r: DrainRecord) => r.containers[0]?.id ?? r.deploymentId;

const isRecord = (r: Partial<DrainRecord>): r is DrainRecord =>
  typeof r.deploymentId === 'string' &&
  typeof r.serviceId === 'string' &&
  Array.isArray(r.containers) &&
  r.containers.every((c) => typeof c?.id === 'string' && typeof c.name === 'string') &&
  Number.isFinite(r.switchedAt) &&
  Number.isFinite(r.deadline) &&
  (r.openAtSwitch === null || (Number.isInteger(r.openAtSwitch) && (r.openAtSwitch as number) >= 0)) &&
  (r.allocationIds === undefined || (Array.isArray(r.allocationIds) && r.allocationIds.length > 0 && r.allocationIds.every((id) => typeof id === 'string')));

export class DrainBook {
  private readonly records = new Map<string, DrainRecord>();
  /** Containers leaving the answers: marked before their record exists (the switch), kept until removed. */
  private readonly marked = new Set<string>();
  private writing: Promise<void> = Promise.resolve();

  constructor(private readonly persist?: { file: string; logger: Logger }) {}

  /** The drains an earlier run left in progress; an unreadable file is logged and ignored. */
  async load(): Promise<DrainRecord[]> {
    if (!this.persist) return [];
    const bytes = await readFileIfExists(this.persist.file).catch(() => null);
    if (bytes === null) return [];
    try {
      const parsed = JSON.parse(bytes.toString('utf8')) as { drains?: unknown };
      for (const r of Array.isArray(parsed.drains) ? (parsed.drains as Partial<DrainRecord>[]) : []) {
        if (!isRecord(r)) continue;
        this.records.set(keyOf(r), r);
        for (const c of r.containers) this.marked.add(c.id);
      }
    } catch (error) {
      this.persist.logger.error({ err: error, file: this.persist.file }, 'drains in progress unreadable; none resumed');
    }
    return [...this.records.values()];
  }

  /** Takes containers out of new traffic now (notServing); their record follows once the switch is done. */
  mark(ids: readonly string[]): void {
    for (const id of ids) this.marked.add(id);
  }

  /** Containers that are draining (or leaving the answers for a drain): no traffic, no removal but the drain's. */
  draining(): ReadonlySet<string> {
    return this.marked;
  }

  /** Records a drain; resolves once it is on disk (a failed write is logged, the drain kept in memory). */
  add(record: DrainRecord): Promise<void> {
    this.records.set(keyOf(record), record);
    this.mark(record.containers.map((c) => c.id));
    return this.save();
  }

  /** A drain of this deployment is under way. */
  has(deploymentId: string): boolean {
    return [...this.records.values()].some((r) => r.deploymentId === deploymentId);
  }

  /** The drain ended: its containers are gone. */
  done(record: DrainRecord): Promise<void> {
    if (!this.records.delete(keyOf(record))) return this.writing;
    for (const c of record.containers) this.marked.delete(c.id);
    return this.save();
  }

  private save(): Promise<void> {
    const persist = this.persist;
    if (!persist) return Promise.resolve();
    const data = `${JSON.stringify({ version: 1, drains: [...this.records.values()] })}\n`;
    this.writing = this.writing
      .then(() => writeFileAtomic(persist.file, data, 0o600))
      .catch((error: unknown) => persist.logger.error({ err: error, file: persist.file }, 'could not persist drains in progress'));
    return this.writing;
  }
}
