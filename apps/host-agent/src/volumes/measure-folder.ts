import { lstat, opendir } from 'node:fs/promises';
import path from 'node:path';

/** What one measurement of a volume's data folder may cost at most (docs/operations.md, "Volumes"). */
export interface MeasureBudget {
  /** Wall time of the walk. */
  timeMs: number;
  /** Directory entries looked at. */
  entries: number;
}

export const DEFAULT_MEASURE_BUDGET: MeasureBudget = Object.freeze({ timeMs: 500, entries: 100_000 });

export type Measurement = { sizeBytes: number } | { sizeBytes: null; reason: 'over-budget' | 'unreadable' };

/**
 * Bytes a folder takes on disk (allocated blocks, as `du` counts them; a file with several hard links once),
 * walked without following symbolic links. Past the budget it stops and says so rather than guessing: a
 * partial sum would read as a size that is not.
 */
export async function measureFolder(root: string, budget: MeasureBudget = DEFAULT_MEASURE_BUDGET, now: () => number = performance.now.bind(performance)): Promise<Measurement> {
  const deadline = now() + budget.timeMs;
  const seen = new Set<string>();
  let entries = 0;
  let bytes = 0;
  const stack = [root];
  try {
    const top = await lstat(root);
    if (!top.isDirectory()) return { sizeBytes: null, reason: 'unreadable' };
    bytes += top.blocks * 512;
    while (stack.length > 0) {
      const dir = await opendir(stack.pop()!);
      try {
        for await (const entry of dir) {
          if (++entries > budget.entries || now() > deadline) return { sizeBytes: null, reason: 'over-budget' };
          const full = path.join(dir.path, entry.name);
          const s = await lstat(full);
          const key = `${s.dev}:${s.ino}`;
          if (s.nlink > 1) {
            if (seen.has(key)) continue;
            seen.add(key);
          }
          bytes += s.blocks * 512;
          if (s.isDirectory()) stack.push(full);
        }
      } finally {
        await dir.close().catch(() => undefined);
      }
    }
  } catch {
    return { sizeBytes: null, reason: 'unreadable' };
  }
  return { sizeBytes: bytes };
}
