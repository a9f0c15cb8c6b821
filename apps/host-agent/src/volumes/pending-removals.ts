import type { Logger } from '@tether/common';
import { readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';

/**
 * Volume removals the agent ACKed and has not finished (`volumes.remove`), kept in
 * TETHER_STATE_DIR/volume-removals.json (written atomically before the ACK), so an agent restart
 * resumes them instead of forgetting them: the panel was told "taken", the data must really go.
 */
export interface PendingRemoval {
  serviceId: string;
  /** Only these volumes of the service (`tether.volume` labels); null: every one of them. */
  names: string[] | null;
}

const keyOf = (r: PendingRemoval) => `${r.serviceId}/${r.names === null ? '*' : [...r.names].sort().join(',')}`;

export class PendingRemovals {
  private readonly entries = new Map<string, PendingRemoval>();
  private writing: Promise<void> = Promise.resolve();

  constructor(private readonly persist?: { file: string; logger: Logger }) {}

  /** What an earlier run left to do; an unreadable file is logged and ignored. */
  async load(): Promise<PendingRemoval[]> {
    if (!this.persist) return [];
    const bytes = await readFileIfExists(this.persist.file).catch(() => null);
    if (bytes === null) return [];
    try {
      const parsed = JSON.parse(bytes.toString('utf8')) as { removals?: unknown };
      for (const r of Array.isArray(parsed.removals) ? (parsed.removals as Partial<PendingRemoval>[]) : []) {
        const names = r.names === null ? null : Array.isArray(r.names) && r.names.every((n) => typeof n === 'string') ? r.names : undefined;
        if (typeof r.serviceId === 'string' && r.serviceId.length > 0 && names !== undefined) this.entries.set(keyOf({ serviceId: r.serviceId, names }), { serviceId: r.serviceId, names });
      }
    } catch (error) {
      this.persist.logger.error({ err: error, file: this.persist.file }, 'pending volume removals unreadable; none resumed');
    }
    return [...this.entries.values()];
  }

  /** Records a removal; resolves once it is on disk (or the write failed: it is then logged, kept in memory). */
  add(removal: PendingRemoval): Promise<void> {
    this.entries.set(keyOf(removal), removal);
    return this.save();
  }

  done(removal: PendingRemoval): Promise<void> {
    return this.entries.delete(keyOf(removal)) ? this.save() : this.writing;
  }

  private save(): Promise<void> {
    const persist = this.persist;
    if (!persist) return Promise.resolve();
    const data = `${JSON.stringify({ version: 1, removals: [...this.entries.values()] })}\n`;
    this.writing = this.writing
      .then(() => writeFileAtomic(persist.file, data, 0o600))
      .catch((error: unknown) => persist.logger.error({ err: error, file: persist.file }, 'could not persist pending volume removals'));
    return this.writing;
  }
}
