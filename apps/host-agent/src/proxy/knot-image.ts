import { existsSync } from 'node:fs';
import type Docker from 'dockerode';
import { answererRootUsable } from '../answerer-root.js';
import { binaryFiles, ensureLocalImage, textFile, treeFiles, type ImageFile } from './local-image.js';

// The answerer's image (TETHER_PROXY=container with static routing), made
// like the Caddy image (local-image.ts): Debian's knotd and knotc with the
// shared objects `ldd` names, no registry. knotd runs as the container's
// entrypoint; knotc is there for the agent's `docker exec … zone-reload`,
// so the agent itself needs no knot installed. The agent image carries the
// same tree, copied from the answerer image infra/answerer/build-image.sh
// makes (TETHER_ANSWERER_ROOT): the agent in a container builds from it.

export const ANSWERER_IMAGE_REPOSITORY = 'tether/answerer';
/** Bump when the layout below changes without any input file changing. */
const RECIPE_VERSION = '1';

export interface KnotImageOptions {
  knotd: string;
  knotc: string;
  /** A whole answerer tree (usr/sbin/knotd, knotc and their shared objects); used instead of knotd/knotc when given. */
  root?: string | null;
  repository?: string;
}

export { answererRootUsable };

async function knotFiles(options: KnotImageOptions): Promise<ImageFile[]> {
  // The tree holds its own nsswitch.conf, /tmp and /run/knot already.
  if (answererRootUsable(options.root)) return (await treeFiles(options.root)).filter((f) => f.target !== '/etc/nsswitch.conf');
  for (const binary of [options.knotd, options.knotc]) {
    if (!existsSync(binary)) throw new Error(`no ${binary} (install Debian's knot package or set TETHER_ANSWERER_IMAGE)`);
  }
  return binaryFiles([
    { source: options.knotd, target: '/usr/sbin/knotd' },
    { source: options.knotc, target: '/usr/sbin/knotc' },
  ]);
}

export async function ensureKnotImage(docker: Docker, options: KnotImageOptions): Promise<string> {
  const files = await knotFiles(options);
  files.push(textFile('/etc/nsswitch.conf', 'hosts: files dns\n'));
  return ensureLocalImage(docker, {
    repository: options.repository ?? ANSWERER_IMAGE_REPOSITORY,
    recipeVersion: RECIPE_VERSION,
    files,
    dirs: ['tmp', 'run/knot'],
    changes: ['ENTRYPOINT ["/usr/sbin/knotd"]', 'LABEL tether.role=answerer'],
  });
}
