import { describe, expect, it } from 'vitest';
import { pinImage, pinnedReference, repositoryOf } from '../../src/runtime/image-pin.js';

// What a deployment ran, pinned: the registry's digest of the image's own
// repository when there is one, else the node's image id.

const id = `sha256:${'a'.repeat(64)}`;
const digest = (repo: string, c = 'b') => `${repo}@sha256:${c.repeat(64)}`;

describe('repositoryOf', () => {
  it('drops the tag or digest, never a registry port', () => {
    expect(repositoryOf('registry.example.com:5000/team/app:1')).toBe('registry.example.com:5000/team/app');
    expect(repositoryOf('registry.example.com:5000/team/app')).toBe('registry.example.com:5000/team/app');
    expect(repositoryOf('busybox:1.36')).toBe('busybox');
    expect(repositoryOf(digest('localhost:5000/app'))).toBe('localhost:5000/app');
  });
});

describe('pinnedReference', () => {
  it('the digest of the image\'s repository, Docker Hub short names included', () => {
    expect(pinnedReference('registry.example.com:5000/team/app:1', { id, repoDigests: [digest('other.example.com/x'), digest('registry.example.com:5000/team/app', 'c')] })).toBe(
      digest('registry.example.com:5000/team/app', 'c'),
    );
    expect(pinnedReference('busybox:1.36', { id, repoDigests: [digest('busybox')] })).toBe(digest('busybox'));
    expect(pinnedReference('docker.io/library/busybox:1.36', { id, repoDigests: [digest('busybox')] })).toBe(digest('busybox'));
  });

  it('the image id for an image the node built or loaded (no digest), or one of another repository', () => {
    expect(pinnedReference('tether-test/web:1', { id, repoDigests: [] })).toBe(id);
    expect(pinnedReference('app:1', { id, repoDigests: [digest('registry.example.com/app')] })).toBe(id);
  });

  it('a reference that is a digest already pins itself', () => {
    const ref = digest('registry.example.com/app', 'd');
    expect(pinnedReference(ref, { id, repoDigests: [] })).toBe(ref);
  });

  it('pinImage: undefined when the engine has no such image or cannot answer', async () => {
    expect(await pinImage({ imageIdentity: async () => null }, 'x:1')).toBeUndefined();
    expect(await pinImage({ imageIdentity: async () => Promise.reject(new Error('daemon down')) }, 'x:1')).toBeUndefined();
    expect(await pinImage({ imageIdentity: async () => ({ id, repoDigests: [] }) }, 'x:1')).toBe(id);
  });
});
