import { appendFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { DurableFact } from './facts.js';

// The outbox's append-only file in the data folder: durable facts the
// database refused are appended here, one JSON line each, with their sequence
// number, so a panel restarted (or killed) during an outage replays them in
// order. Appends are synchronous so a line is with the OS before the next fact
// is decided; a torn last line (a crash mid-write) is skipped on reading. The
// file is removed once every fact in it has committed.

export interface SpilledFact {
  seq: number;
  fact: DurableFact;
}

export class SpillFile {
  constructor(readonly file: string) {}

  append(entries: readonly SpilledFact[]): void {
    if (entries.length === 0) return;
    mkdirSync(path.dirname(this.file), { recursive: true });
    appendFileSync(this.file, entries.map((e) => JSON.stringify(e) + '\n').join(''));
  }

  /** Every intact line, in file order; a missing file is empty. */
  read(): { entries: SpilledFact[]; skipped: number } {
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { entries: [], skipped: 0 };
      throw err;
    }
    const entries: SpilledFact[] = [];
    let skipped = 0;
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        const parsed = JSON.parse(line) as SpilledFact;
        if (typeof parsed.seq === 'number' && parsed.fact && typeof parsed.fact.kind === 'string') entries.push(parsed);
        else skipped++;
      } catch {
        skipped++;
      }
    }
    return { entries, skipped };
  }

  remove(): void {
    rmSync(this.file, { force: true });
  }
}
