import type { ContainerRuntime } from './container-runtime.js';
import type { DeployOutcome } from '../controllers.js';

// What a deployment ran, pinned (deploy.result `imageRef`): a rollback to it
// must run the same bytes even when its tag was moved since. A registry's
// digest for the image's own repository is pullable on any node; an image
// built or loaded on this node has none, and its local id names it here.

/** `registry:5000/team/app:1` → `registry:5000/team/app` (a port is not a tag: only a colon after the last slash is). */
export function repositoryOf(image: string): string {
  const at = image.indexOf('@');
  const name = at === -1 ? image : image.slice(0, at);
  const colon = name.lastIndexOf(':');
  return colon > name.lastIndexOf('/') ? name.slice(0, colon) : name;
}

/** Docker's short names: `app` is `docker.io/library/app`, `team/app` is `docker.io/team/app`. */
function canonicalRepository(repository: string): string {
  const first = repository.split('/')[0]!;
  const hasRegistry = repository.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  const full = hasRegistry ? repository : `docker.io/${repository}`;
  return /^docker\.io\/[^/]+$/.test(full) ? full.replace(/^docker\.io\//, 'docker.io/library/') : full;
}

export function pinnedReference(image: string, identity: { id: string; repoDigests: readonly string[] }): string {
  // Already a digest: it pins itself.
  if (/@sha256:[0-9a-f]{64}$/.test(image)) return image;
  const wanted = canonicalRepository(repositoryOf(image));
  const digest = identity.repoDigests.find((d) => canonicalRepository(repositoryOf(d)) === wanted);
  return digest ?? identity.id;
}

/** The image a running deployment used, pinned; undefined when the engine cannot say (the outcome stands without it). */
export async function pinImage(runtime: Pick<ContainerRuntime, 'imageIdentity'>, image: string): Promise<string | undefined> {
  try {
    const identity = await runtime.imageIdentity(image);
    return identity ? pinnedReference(image, identity) : undefined;
  } catch {
    return undefined;
  }
}

/** A running outcome with the image it ran pinned (every answer for a running deployment names it, a redelivery's too). */
export async function withPinnedImage(runtime: Pick<ContainerRuntime, 'imageIdentity'>, image: string, outcome: DeployOutcome): Promise<DeployOutcome> {
  if (outcome.status !== 'running' || outcome.imageRef) return outcome;
  const imageRef = await pinImage(runtime, image);
  return imageRef ? { ...outcome, imageRef } : outcome;
}
