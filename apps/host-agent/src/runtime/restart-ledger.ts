/**
 * The agent's own restarts per container. Docker's RestartCount only counts
 * restart-policy restarts, and Tether sets no policy, so without this the
 * heartbeat would always say 0. Kept in memory: an agent restart resets the
 * budget (and the count the agent adds), which errs towards trying again.
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
  }

  markReported(id: string): void {
    this.entry(id).reported = true;
  }

  total(id: string): number {
    return this.entries.get(id)?.total ?? 0;
  }

  /** A container that has run `stableMs` without crashing gets its budget back. */
  settle(running: { id: string; startedAt: number | null }[], now: number, stableMs: number): void {
    for (const c of running) {
      const e = this.entries.get(c.id);
      if (e && c.startedAt !== null && now - c.startedAt >= stableMs) {
        e.spent = 0;
        e.reported = false;
      }
    }
  }

  /** Drops containers that no longer exist. */
  retain(ids: Set<string>): void {
    for (const id of this.entries.keys()) if (!ids.has(id)) this.entries.delete(id);
  }

  /** Views for plan(). */
  spentView(): Map<string, number> {
    return new Map([...this.entries].map(([id, e]) => [id, e.spent]));
  }

  reportedView(): Set<string> {
    return new Set([...this.entries].filter(([, e]) => e.reported).map(([id]) => id));
  }
}
