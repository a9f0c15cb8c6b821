import { createHmac, randomBytes } from 'node:crypto';
import { errorMessage, truncate, type Logger } from '@tether/common';
import { registryHostOf, type Workload } from '@tether/protocol';
import { readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';
import type { ContainerRuntime, RegistryAuth } from './container-runtime.js';
import { RUNTIME_ERROR_CODES, RuntimeError, type RuntimeErrorCode } from './errors.js';

// Which image a workload may run, and the pull that gets it (issue 24).
//
// "Private" image: one this agent pulled with registry credentials. Its image
// id (Docker's sha256 of the image config, so every tag and digest naming the
// same image counts) is kept in TETHER_STATE_DIR/private-images.json, so it
// survives agent restarts. An image already on the node runs without a pull,
// as before, unless it is private: then it runs only for a workload whose
// credentials were checked against its registry, by a pull of that reference
// with them (a cached pull costs a manifest request). Checks that passed are
// remembered in memory for this agent process only, as HMACs under a key made
// at start, never as passwords: a workload of another team (other or no
// credentials) is checked anew, and refused with REGISTRY_AUTH_FAILED when the
// registry does not let it pull.
//
// Images put on the node by hand (`docker pull`, `docker load`) are not known
// as private: they run for anyone naming them, as every local image did before.

const FILE_VERSION = 1;

export class PrivateImages {
  private readonly ids = new Set<string>();
  /** HMAC key for the fingerprints of credentials checked in this process. */
  private readonly key = randomBytes(32);
  private readonly checked = new Set<string>();
  private writes: Promise<void> = Promise.resolve();

  constructor(private readonly persist?: { file: string; logger: Logger }) {}

  /** Reads the ids an earlier run wrote; an unreadable file is logged and ignored (every image then counts as not private). */
  async load(): Promise<void> {
    if (!this.persist) return;
    try {
      const bytes = await readFileIfExists(this.persist.file);
      if (!bytes) return;
      const parsed = JSON.parse(bytes.toString('utf8')) as { version?: number; imageIds?: unknown };
      if (parsed.version !== FILE_VERSION || !Array.isArray(parsed.imageIds)) throw new Error(`unknown format (version ${String(parsed.version)})`);
      for (const id of parsed.imageIds) if (typeof id === 'string') this.ids.add(id);
    } catch (err) {
      this.persist.logger.error({ err, file: this.persist.file }, 'private image list unreadable; images pulled with credentials before are not known as private');
    }
  }

  isPrivate(imageId: string): boolean {
    return this.ids.has(imageId);
  }

  /** Waits for the writes started so far. */
  flushed(): Promise<void> {
    return this.writes;
  }

  markPrivate(imageId: string): void {
    if (this.ids.has(imageId)) return;
    this.ids.add(imageId);
    const persist = this.persist;
    if (!persist) return;
    const text = `${JSON.stringify({ version: FILE_VERSION, imageIds: [...this.ids].sort() })}\n`;
    this.writes = this.writes
      .then(() => writeFileAtomic(persist.file, text, 0o600))
      .catch((err: unknown) => persist.logger.error({ err, file: persist.file }, 'could not persist the private image list'));
  }

  private fingerprint(imageId: string, image: string, auth: RegistryAuth): string {
    return createHmac('sha256', this.key).update([imageId, image, auth.serveraddress, auth.username, auth.password].join('\0')).digest('hex');
  }

  wasChecked(imageId: string, image: string, auth: RegistryAuth): boolean {
    return this.checked.has(this.fingerprint(imageId, image, auth));
  }

  noteChecked(imageId: string, image: string, auth: RegistryAuth): void {
    this.checked.add(this.fingerprint(imageId, image, auth));
  }
}

/** The credentials of a workload for its image's registry (none when the panel sent none or for another host). */
export function authOf(workload: Pick<Workload, 'image' | 'registryAuth'>): RegistryAuth | undefined {
  const a = workload.registryAuth;
  if (!a || a.host !== registryHostOf(workload.image)) return undefined;
  return { username: a.username, password: a.password, serveraddress: a.host };
}

const UNREACHABLE = /dial tcp|connection refused|no such host|i\/o timeout|timeout|timed out|tls:|x509|certificate|\beof\b|connection reset|network is unreachable|server misbehaving|http response to https client/i;
const AUTH = /unauthorized|authentication required|no basic auth credentials|access to the resource is denied|denied|forbidden|incorrect username or password|may require 'docker login'/i;
const NOT_FOUND = /manifest unknown|not found|name unknown|does not exist/i;
/** Docker's fallback to plain HTTP for a loopback registry after HTTPS asked for credentials it was not given. */
const INSECURE_FALLBACK = /http request to an https server/i;

/** Which deployment reason a failed pull is, from the daemon's words. */
export function pullFailureCode(said: string, statusCode: number | null, hadAuth: boolean, timedOut: boolean): RuntimeErrorCode {
  if (timedOut) return RUNTIME_ERROR_CODES.REGISTRY_UNREACHABLE;
  if (AUTH.test(said)) return RUNTIME_ERROR_CODES.REGISTRY_AUTH_FAILED;
  if (statusCode === 404 || NOT_FOUND.test(said)) return RUNTIME_ERROR_CODES.IMAGE_NOT_FOUND;
  if (!hadAuth && INSECURE_FALLBACK.test(said)) return RUNTIME_ERROR_CODES.REGISTRY_AUTH_FAILED;
  if (UNREACHABLE.test(said)) return RUNTIME_ERROR_CODES.REGISTRY_UNREACHABLE;
  return RUNTIME_ERROR_CODES.IMAGE_PULL_FAILED;
}

function pullFailure(image: string, err: unknown, auth: RegistryAuth | undefined, why: string): RuntimeError {
  const e = err instanceof RuntimeError ? err : null;
  const said = truncate(e?.daemonMessage ?? errorMessage(err), 300);
  const host = registryHostOf(image);
  const code = pullFailureCode(said, e?.statusCode ?? null, auth !== undefined, /did not finish within/.test(e?.message ?? ''));
  const who = auth ? `with the credentials of user ${auth.username}` : 'without credentials (the team has no registry for this host: POST /v1/registries)';
  const text: Record<string, string> = {
    REGISTRY_AUTH_FAILED: `registry ${host} refused to let this service pull ${image} ${who}`,
    IMAGE_NOT_FOUND: `registry ${host} has no image ${image} (check the repository and tag)`,
    REGISTRY_UNREACHABLE: `registry ${host} could not be reached to pull ${image}`,
    IMAGE_PULL_FAILED: `pulling ${image} from ${host} failed`,
  };
  return new RuntimeError(code, `${text[code]}${why}; the registry said: ${said}`, { cause: err, daemonMessage: said, statusCode: e?.statusCode ?? null });
}

/**
 * Makes sure the workload's image is on the node and that this workload may
 * run it (see above); throws a RuntimeError with the deployment's reason.
 */
export async function ensureImage(runtime: ContainerRuntime, images: PrivateImages, workload: Pick<Workload, 'image' | 'registryAuth'>, pullTimeoutMs: number): Promise<void> {
  const { image } = workload;
  const auth = authOf(workload);
  const present = await runtime.imageId(image);
  if (present !== null && !images.isPrivate(present)) return;
  if (present !== null && auth && images.wasChecked(present, image, auth)) return;
  const why = present === null ? '' : ' (the image is on this node, but it came from a registry that needed credentials, so each team must prove its own)';
  try {
    await runtime.pull(image, pullTimeoutMs, auth);
  } catch (err) {
    if (err instanceof RuntimeError && err.code === RUNTIME_ERROR_CODES.RUNTIME_UNAVAILABLE) throw err;
    throw pullFailure(image, err, auth, why);
  }
  const id = await runtime.imageId(image);
  if (id === null) throw new RuntimeError(RUNTIME_ERROR_CODES.IMAGE_NOT_FOUND, `image ${image} is still missing after a successful pull`);
  if (auth) {
    images.markPrivate(id);
    images.noteChecked(id, image, auth);
  }
}
