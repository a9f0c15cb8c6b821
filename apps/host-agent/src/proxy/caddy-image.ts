import { existsSync } from 'node:fs';
import type Docker from 'dockerode';
import { binaryFiles, ensureLocalImage, fileFrom, textFile, type ImageFile } from './local-image.js';
import { renderBootstrapConfig, type CaddyAdminSettings } from './render.js';

// The proxy image, built on the host from Debian's caddy package: no registry
// is needed (none is reachable where Tether runs its tests, and many hosts
// should not pull a proxy from the internet). infra/caddy/ holds the same
// recipe as a shell script for operators. Debian's /usr/bin/caddy is linked
// against glibc and libzstd, so the shared objects `ldd` names go in too
// (local-image.ts, shared with the answerer's image).

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

async function imageFiles(binary: string): Promise<ImageFile[]> {
  const files = await binaryFiles([{ source: binary, target: '/usr/bin/caddy' }]);
  const caBundle = '/etc/ssl/certs/ca-certificates.crt';
  // ACME and HTTPS upstreams need the CA bundle; without it automatic HTTPS cannot work.
  if (existsSync(caBundle)) files.push(await fileFrom(caBundle, caBundle, 0o644));
  files.push(textFile(CADDY_CONTAINER.bootstrapPath, `${renderBootstrapConfig(CADDY_CONTAINER_ADMIN)}\n`));
  files.push(textFile('/etc/nsswitch.conf', 'hosts: files dns\n'));
  return files;
}

const IMAGE_CHANGES = [
  'ENTRYPOINT ["/usr/bin/caddy"]',
  `CMD ["run", "--config", "${CADDY_CONTAINER.bootstrapPath}"]`,
  `ENV HOME=${CADDY_CONTAINER.dataDir}`,
  `ENV XDG_DATA_HOME=${CADDY_CONTAINER.dataDir}`,
  `ENV XDG_CONFIG_HOME=${CADDY_CONTAINER.dataDir}/config`,
  'LABEL tether.role=proxy',
];

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
  return ensureLocalImage(docker, {
    repository: options.repository ?? CADDY_IMAGE_REPOSITORY,
    recipeVersion: RECIPE_VERSION,
    files: await imageFiles(options.binary),
    dirs: ['tmp', CADDY_CONTAINER.dataDir, CADDY_CONTAINER.socketDir],
    changes: IMAGE_CHANGES,
  });
}
