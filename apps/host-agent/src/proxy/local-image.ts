import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type Docker from 'dockerode';

// Images built on the host from Debian's binaries, without a registry (none
// is reachable where Tether runs its tests, and many hosts should not pull
// their proxy from the internet): the binaries, every shared object `ldd`
// names for them, and a few text files, imported as one layer under a
// content-addressed tag. The Caddy image (caddy-image.ts) and the static
// proxy's answerer image (knot-image.ts) are both made this way.

const execFileAsync = promisify(execFile);

export interface ImageFile {
  target: string;
  mode: number;
  content: Buffer;
}

/** Shared objects a dynamically linked binary needs, as `ldd` lists them; none for a static binary. */
async function sharedLibraries(binary: string): Promise<string[]> {
  let stdout: string;
  try {
    ({ stdout } = await execFileAsync('ldd', [binary]));
  } catch (error) {
    const out = `${(error as { stdout?: string }).stdout ?? ''}${(error as { stderr?: string }).stderr ?? ''}`;
    if (/not a dynamic executable|statically linked/.test(out)) return [];
    throw error;
  }
  return [...stdout.matchAll(/(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/g)].map((m) => m[1] as string);
}

export async function fileFrom(source: string, target: string, mode: number): Promise<ImageFile> {
  return { target, mode, content: await readFile(source) };
}

export function textFile(target: string, content: string): ImageFile {
  return { target, mode: 0o644, content: Buffer.from(content) };
}

/** Each binary at its target path, plus the shared objects any of them needs (each once), sorted by path. */
export async function binaryFiles(binaries: ReadonlyArray<{ source: string; target: string }>): Promise<ImageFile[]> {
  const files: ImageFile[] = [];
  const libs = new Set<string>();
  for (const b of binaries) {
    files.push(await fileFrom(b.source, b.target, 0o755));
    for (const lib of await sharedLibraries(b.source)) libs.add(lib);
  }
  for (const lib of libs) files.push(await fileFrom(lib, lib, 0o755));
  return files;
}

/** Every regular file under `root`, at its path inside it, with its mode (a tree made by infra/answerer/build-image.sh). */
export async function treeFiles(root: string): Promise<ImageFile[]> {
  const files: ImageFile[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of (await readdir(path.join(root, dir), { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const rel = path.posix.join(dir, entry.name);
      if (entry.isDirectory()) await walk(rel);
      else if (entry.isFile()) files.push({ target: rel, mode: (await stat(path.join(root, rel))).mode & 0o7777, content: await readFile(path.join(root, rel)) });
    }
  };
  await walk('/');
  return files;
}

export interface LocalImageRecipe {
  repository: string;
  /** Bump when the layout changes without any input file changing. */
  recipeVersion: string;
  files: ImageFile[];
  /** Folders made world-writable (sticky) in the image. */
  dirs: string[];
  /** `docker import --change` lines (ENTRYPOINT, CMD, ENV, LABEL). */
  changes: string[];
}

/** Content-addressed tag: new binaries, libraries or recipe give a new image, the same inputs the same tag. */
export function localImageTag(recipe: Pick<LocalImageRecipe, 'repository' | 'recipeVersion' | 'files'>): string {
  const files = [...recipe.files].sort((a, b) => (a.target < b.target ? -1 : 1));
  const hash = createHash('sha256').update(recipe.recipeVersion);
  for (const f of files) hash.update(`\0${f.target}\0${f.mode}\0`).update(f.content);
  return `${recipe.repository}:${hash.digest('hex').slice(0, 16)}`;
}

async function importImage(docker: Docker, recipe: LocalImageRecipe, tag: string): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-image-'));
  try {
    for (const f of recipe.files) {
      const dest = path.join(dir, f.target);
      await mkdir(path.dirname(dest), { recursive: true });
      await writeFile(dest, f.content);
      await chmod(dest, f.mode);
    }
    for (const d of recipe.dirs) {
      await mkdir(path.join(dir, d), { recursive: true });
      await chmod(path.join(dir, d), 0o1777);
    }
    const tar = spawn('tar', ['-C', dir, '--numeric-owner', '--owner=0', '--group=0', '-c', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const tarExit = new Promise<number | null>((resolve) => tar.once('close', resolve));
    const [repo, version] = tag.split(':') as [string, string];
    const progress = await docker.importImage(tar.stdout, { repo, tag: version, changes: recipe.changes });
    await new Promise<void>((resolve, reject) =>
      docker.modem.followProgress(progress, (err: Error | null, output: Array<{ error?: string }>) => {
        const failed = err?.message ?? output.find((o) => o.error)?.error;
        if (failed) reject(new Error(`docker import of ${tag} failed: ${failed}`));
        else resolve();
      }),
    );
    const exitCode = await tarExit;
    if (exitCode !== 0) throw new Error(`tar of the ${tag} image folder exited with ${exitCode}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * The tag of the local image for `recipe`, imported first when the engine does not
 * have it. Safe to call from several agents at once: they import the same content under the same tag.
 */
export async function ensureLocalImage(docker: Docker, recipe: LocalImageRecipe): Promise<string> {
  const tag = localImageTag(recipe);
  try {
    await docker.getImage(tag).inspect();
    return tag;
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode !== 404) throw error;
  }
  await importImage(docker, recipe, tag);
  await docker.getImage(tag).inspect();
  return tag;
}
