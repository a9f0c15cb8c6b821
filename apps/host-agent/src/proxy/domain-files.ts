import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../state/atomic-file.js';

// The domain lists Caddy reads per request: one empty file per name, so the
// `file` matcher (routing) and the TLS `ask` server (certificates) answer
// from disk while the agent is down. Each file appears or goes in one atomic
// step; a set is replaced by adding the new names before removing the old
// ones, so a name present in both is never missing in between.

export async function syncNameFiles(dir: string, names: readonly string[]): Promise<{ added: number; removed: number }> {
  await mkdir(dir, { recursive: true });
  const want = new Set(names);
  const have = new Set((await readdir(dir)).filter((n) => !n.startsWith('.')));
  let added = 0;
  let removed = 0;
  for (const name of want) {
    if (have.has(name)) continue;
    await writeFileAtomic(path.join(dir, name), '', 0o644);
    added += 1;
  }
  for (const name of have) {
    if (want.has(name)) continue;
    await rm(path.join(dir, name), { force: true });
    removed += 1;
  }
  return { added, removed };
}
