import type { Logger } from '@tether/common';
import { readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';

/**
 * The agent's own restarts per container. Docker's RestartCount only counts
 * restart-policy restarts, and Tether sets no policy, so without this the
 * heartbeat would always say 0. With a file (TETHER_STATE_DIR/
 * restart-counters.json) the counts and the budget spent survive an agent
 * restart: a restarted agent neither reports a crash-looping container as
 * never restarted nor gives it a fresh budget; a container that then runs
 * stably gets its budget back as always.
 */
interface Entry {
  /** Restarts since the container last ran stably; compared with the budget. */
  spent: number;
  /** Every restart the agent made; only grows. */
  total: number;
  reported: boolean;
}

export class RestartLedger {
  private readonly entries = new Map<string, Entry>();
  private writing: Promise<void> = Promise.resolve();

  constructor(private readonly persist?: { file: string; logger: Logger }) {}

  /** Reads the file an earlier run wrote; an unreadable one is ignored (counting starts again). */
  async load(): Promise<void> {
    if (!this.persist) return;
    const bytes = await readFileIfExists(this.persist.file).catch(() => null);
    if (bytes === null) return;
    try {
      const parsed = JSON.parse(bytes.toString('utf8')) as { version?: number; entries?: Record<string, Entry> };
      for (const [id, e] of Object.entries(parsed.entries ?? {})) {
        if (Number.isInteger(e.spent) && Number.isInteger(e.total) && typeof e.reported === 'boolean' && e.spent >= 0 && e.total >= 0) {
          this.entries.set(id, { spent: e.spent, total: e.total, reported: e.reported });
        }
      }
    } catch (error) {
      this.persist.logger.error({ err: error, file: this.persist.file }, 'restart counters unreadable; counting starts again');
    }
  }

  /** Waits for the writes started so far. */
  flushed(): Promise<void> {
    return this.writing;
  }

  private save(): void {
    const persist = this.persist;
    if (!persist) return;
    this.writing = this.writing
      .then(() => writeFileAtomic(persist.file, `${JSON.stringify({ version: 1, entries: Object.fromEntries(this.entries) })}\n`, 0o600))
      .catch((error: unknown) => persist.logger.error({ err: error, file: persist.file }, 'could not persist restart counters'));
  }

  private entry(id: string): Entry {
    let e = this.entries.get(id);
    if (!e) {
      e = { spent: 0, total: 0, reported: false };
      this.entries.set(id, e);
    }
    return e;
  }

  recordRestart(id: string): void {
    const e = this.entry(id);
    e.spent++;
    e.total++;
    this.save();
  }

  markReported(id: string): void {
    this.entry(id).reported = true;
    this.save();
  }

  total(id: string): number {
    return this.entries.get(id)?.total ?? 0;
  }

  /** A container that has run `stableMs` without crashing gets its budget back. */
  settle(running: { id: string; startedAt: number | null }[], now: number, stableMs: number): void {
    let changed = false;
    for (const c of running) {
      const e = this.entries.get(c.id);
      if (e && c.startedAt !== null && now - c.startedAt >= stableMs && (e.spent !== 0 || e.reported)) {
        e.spent = 0;
        e.reported = false;
        changed = true;
      }
    }
    if (changed) this.save();
  }

  /** Drops containers that no longer exist. */
  retain(ids: Set<string>): void {
    let changed = false;
    for (const id of this.entries.keys()) {
      if (!ids.has(id)) {
        this.entries.delete(id);
        changed = true;
      }
    }
    if (changed) this.save();
  }

  /** Views for plan(). */
  spentView(): Map<string, number> {
    return new Map([...this.entries].map(([id, e]) => [id, e.spent]));
  }

  reportedView(): Set<string> {
    return new Set([...this.entries].filter(([, e]) => e.reported).map(([id]) => id));
  }
}
