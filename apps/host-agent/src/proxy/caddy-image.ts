import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type Docker from 'dockerode';
import { renderBootstrapConfig, type CaddyAdminSettings } from './render.js';

// The proxy image, built on the host from Debian's caddy package: no registry
// is needed (none is reachable where Tether runs its tests, and many hosts
// should not pull a proxy from the internet). infra/caddy/ holds the same
// recipe as a shell script for operators. Debian's /usr/bin/caddy is linked
// against glibc and libzstd, so the shared objects `ldd` names go in too.

const execFileAsync = promisify(execFile);

/** Where things live inside the container. */
export const CADDY_CONTAINER = Object.freeze({
  bootstrapPath: '/etc/caddy/bootstrap.json',
  dataDir: '/data',
  socketDir: '/run/tether-caddy',
  httpPort: 80,
  httpsPort: 443,
});

/**
 * The admin API of the Caddy container: a unix socket in a directory shared
 * with the host, not a TCP port, because every service container on Tether's
 * network could reach a TCP admin port and rewrite everyone's routing.
 */
export const CADDY_CONTAINER_ADMIN: CaddyAdminSettings = Object.freeze({
  listen: `unix/${CADDY_CONTAINER.socketDir}/admin.sock`,
  origins: ['localhost'],
});

export const CADDY_IMAGE_REPOSITORY = 'tether/caddy';
/** Bump when the layout below changes without any input file changing. */
const RECIPE_VERSION = '1';

interface ImageFile {
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

async function imageFiles(binary: string): Promise<ImageFile[]> {
  const file = async (source: string, target: string, mode: number) => ({ target, mode, content: await readFile(source) });
  const files = [await file(binary, '/usr/bin/caddy', 0o755)];
  for (const lib of await sharedLibraries(binary)) files.push(await file(lib, lib, 0o755));
  const caBundle = '/etc/ssl/certs/ca-certificates.crt';
  // ACME and HTTPS upstreams need the CA bundle; without it automatic HTTPS cannot work.
  if (existsSync(caBundle)) files.push(await file(caBundle, caBundle, 0o644));
  const text = (target: string, content: string) => ({ target, mode: 0o644, content: Buffer.from(content) });
  files.push(text(CADDY_CONTAINER.bootstrapPath, `${renderBootstrapConfig(CADDY_CONTAINER_ADMIN)}\n`));
  files.push(text('/etc/nsswitch.conf', 'hosts: files dns\n'));
  return files.sort((a, b) => (a.target < b.target ? -1 : 1));
}

/** Content-addressed tag: a new caddy binary, library or recipe gives a new image, the same inputs the same tag. */
function imageTag(files: ImageFile[], repository: string): string {
  const hash = createHash('sha256').update(RECIPE_VERSION);
  for (const f of files) hash.update(`\0${f.target}\0${f.mode}\0`).update(f.content);
  return `${repository}:${hash.digest('hex').slice(0, 16)}`;
}

const IMAGE_CHANGES = [
  'ENTRYPOINT ["/usr/bin/caddy"]',
  `CMD ["run", "--config", "${CADDY_CONTAINER.bootstrapPath}"]`,
  `ENV HOME=${CADDY_CONTAINER.dataDir}`,
  `ENV XDG_DATA_HOME=${CADDY_CONTAINER.dataDir}`,
  `ENV XDG_CONFIG_HOME=${CADDY_CONTAINER.dataDir}/config`,
  'LABEL tether.role=proxy',
];

async function importImage(docker: Docker, files: ImageFile[], tag: string): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-caddy-image-'));
  try {
    for (const f of files) {
      const dest = path.join(dir, f.target);
      await mkdir(path.dirname(dest), { recursive: true });
      await writeFile(dest, f.content);
      await chmod(dest, f.mode);
    }
    for (const d of ['tmp', CADDY_CONTAINER.dataDir, CADDY_CONTAINER.socketDir]) {
      await mkdir(path.join(dir, d), { recursive: true });
      await chmod(path.join(dir, d), 0o1777);
    }
    const tar = spawn('tar', ['-C', dir, '--numeric-owner', '--owner=0', '--group=0', '-c', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const tarExit = new Promise<number | null>((resolve) => tar.once('close', resolve));
    const [repo, version] = tag.split(':') as [string, string];
    const progress = await docker.importImage(tar.stdout, { repo, tag: version, changes: IMAGE_CHANGES });
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

export interface CaddyImageOptions {
  /** The Caddy binary to package (Debian's caddy package). */
  binary: string;
  repository?: string;
}

/**
 * The tag of the local Caddy image, built first when it is missing. Safe to
 * call from several agents at once: they import the same content under the same tag.
 */
export async function ensureCaddyImage(docker: Docker, options: CaddyImageOptions): Promise<string> {
  if (!existsSync(options.binary)) throw new Error(`no caddy binary at ${options.binary} (install Debian's caddy package or set TETHER_CADDY_IMAGE)`);
  const files = await imageFiles(options.binary);
  const tag = imageTag(files, options.repository ?? CADDY_IMAGE_REPOSITORY);
  try {
    await docker.getImage(tag).inspect();
    return tag;
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode !== 404) throw error;
  }
  await importImage(docker, files, tag);
  await docker.getImage(tag).inspect();
  return tag;
}

