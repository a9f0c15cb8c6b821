import { mkdir, readdir, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';

// The domain lists Caddy reads per request: one empty file per name, so the
// `file` matcher (routing) and the TLS `ask` server (certificates) answer
// from disk while the agent is down. Each file appears or goes in one atomic
// step; a set is replaced by adding the new names before removing the old
// ones, so a name present in both is never missing in between. A name may be
// `folder/file` (one level: a route's lookups folder); a folder goes with its
// last file.

/** The names in `dir`: its files, and `folder/file` for the files of its folders (temp files left out). */
export async function listNameFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch((error: { code?: string }) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  const names: string[] = [];
  for (const entry of entries) {
    if (entry.name.startsWith('.')) continue;
    if (!entry.isDirectory()) {
      names.push(entry.name);
      continue;
    }
    for (const inner of await readdir(path.join(dir, entry.name)).catch(() => [] as string[])) {
      if (!inner.startsWith('.')) names.push(`${entry.name}/${inner}`);
    }
  }
  return names;
}

export async function syncNameFiles(dir: string, names: readonly string[]): Promise<{ added: number; removed: number }> {
  await mkdir(dir, { recursive: true });
  const want = new Set(names);
  const have = new Set(await listNameFiles(dir));
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
    const folder = path.dirname(name);
    if (folder !== '.') await rmdir(path.join(dir, folder)).catch(() => undefined);
    removed += 1;
  }
  return { added, removed };
}

/** The names in place in `dir` that stay in `next`: the first step of a change removes, the last one adds. */
export async function keptNames(dir: string, next: readonly string[]): Promise<string[]> {
  const nextSet = new Set(next);
  const current = await listNameFiles(dir);
  return current.filter((n) => nextSet.has(n));
}

/** The digest of the answers on disk (`answersDir/digest`), if the zone the answerer serves holds it. */
export async function answersDigestOnDisk(answersDir: string, zonePath: string): Promise<string | null> {
  const digest = (await readFileIfExists(path.join(answersDir, 'digest')))?.toString('utf8').trim() ?? null;
  const zone = (await readFileIfExists(zonePath))?.toString('utf8') ?? '';
  return digest !== null && zone.includes(`; answers ${digest}`) ? digest : null;
}
