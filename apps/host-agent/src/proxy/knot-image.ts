import { existsSync } from 'node:fs';
import type Docker from 'dockerode';
import { binaryFiles, ensureLocalImage, textFile } from './local-image.js';

// The answerer's image (TETHER_PROXY=container with static routing), made
// like the Caddy image (local-image.ts): Debian's knotd and knotc with the
// shared objects `ldd` names, no registry. knotd runs as the container's
// entrypoint; knotc is there for the agent's `docker exec … zone-reload`,
// so the agent itself needs no knot installed.

export const ANSWERER_IMAGE_REPOSITORY = 'tether/answerer';
/** Bump when the layout below changes without any input file changing. */
const RECIPE_VERSION = '1';

export interface KnotImageOptions {
  knotd: string;
  knotc: string;
  repository?: string;
}

export async function ensureKnotImage(docker: Docker, options: KnotImageOptions): Promise<string> {
  for (const binary of [options.knotd, options.knotc]) {
    if (!existsSync(binary)) throw new Error(`no ${binary} (install Debian's knot package or set TETHER_ANSWERER_IMAGE)`);
  }
  const files = await binaryFiles([
    { source: options.knotd, target: '/usr/sbin/knotd' },
    { source: options.knotc, target: '/usr/sbin/knotc' },
  ]);
  files.push(textFile('/etc/nsswitch.conf', 'hosts: files dns\n'));
  return ensureLocalImage(docker, {
    repository: options.repository ?? ANSWERER_IMAGE_REPOSITORY,
    recipeVersion: RECIPE_VERSION,
    files,
    dirs: ['tmp', 'run/knot'],
    changes: ['ENTRYPOINT ["/usr/sbin/knotd"]', 'LABEL tether.role=answerer'],
  });
}
