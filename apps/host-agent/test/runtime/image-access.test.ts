import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { silentLogger } from '@tether/common';
import { afterEach, describe, expect, it } from 'vitest';
import { authOf, PrivateImages, pullFailureCode } from '../../src/runtime/image-access.js';

// The daemon's words for failed pulls, as Docker 20.10 said them against
// Debian's docker-registry 2.8 (htpasswd + TLS on 127.0.0.1), measured for
// issue 24; the end-to-end proof is control-panel test/e2e-registries.test.ts.
const SAID = {
  wrongPassword: 'unauthorized: authentication required',
  missingTag: 'manifest for 127.0.0.1:32919/team-a/app:2 not found: manifest unknown: manifest unknown',
  // No credentials for a loopback registry: Docker retries over plain HTTP after HTTPS asked for credentials.
  noCredentialsLoopback: 'error parsing HTTP 400 response body: invalid character \'C\' looking for beginning of value: "Client sent an HTTP request to an HTTPS server.\\n"',
  stopped: 'Get "http://127.0.0.1:32919/v2/": dial tcp 127.0.0.1:32919: connect: connection refused',
  hub: "pull access denied for acme/private, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
  badCert: 'Get "https://registry.example:5000/v2/": x509: certificate signed by unknown authority',
};

describe('pull failures become deployment reasons', () => {
  it('maps the daemon words to the catalogued codes', () => {
    expect(pullFailureCode(SAID.wrongPassword, 500, true, false)).toBe('REGISTRY_AUTH_FAILED');
    expect(pullFailureCode(SAID.missingTag, 404, true, false)).toBe('IMAGE_NOT_FOUND');
    expect(pullFailureCode(SAID.missingTag, 500, false, false)).toBe('IMAGE_NOT_FOUND');
    expect(pullFailureCode(SAID.noCredentialsLoopback, 500, false, false)).toBe('REGISTRY_AUTH_FAILED');
    expect(pullFailureCode(SAID.stopped, 500, true, false)).toBe('REGISTRY_UNREACHABLE');
    expect(pullFailureCode(SAID.stopped, 500, false, false)).toBe('REGISTRY_UNREACHABLE');
    expect(pullFailureCode(SAID.hub, 404, false, false)).toBe('REGISTRY_AUTH_FAILED');
    expect(pullFailureCode(SAID.badCert, 500, true, false)).toBe('REGISTRY_UNREACHABLE');
    expect(pullFailureCode('no answer from the registry within 1000 ms', null, true, true)).toBe('REGISTRY_UNREACHABLE');
    expect(pullFailureCode('something else entirely', 500, true, false)).toBe('IMAGE_PULL_FAILED');
  });
});

describe('credentials of a workload', () => {
  const creds = { host: 'registry.example.com:5000', username: 'u', password: 'p' };
  it('are used only for an image of their host', () => {
    expect(authOf({ image: 'registry.example.com:5000/team/app:1', registryAuth: creds })).toEqual({ username: 'u', password: 'p', serveraddress: 'registry.example.com:5000' });
    expect(authOf({ image: 'ghcr.io/team/app:1', registryAuth: creds })).toBeUndefined();
    expect(authOf({ image: 'registry.example.com:5000/team/app:1' })).toBeUndefined();
  });
});

describe('the private image list', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('survives a restart without a credential in it; checks do not', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'tether-private-images-'));
    const file = path.join(dir, 'private-images.json');
    const auth = { username: 'team-a', password: 'secret-pw-123', serveraddress: 'r.example' };
    const first = new PrivateImages({ file, logger: silentLogger });
    await first.load();
    expect(first.isPrivate('sha256:aa')).toBe(false);
    first.markPrivate('sha256:aa');
    first.noteChecked('sha256:aa', 'r.example/a:1', auth);
    expect(first.wasChecked('sha256:aa', 'r.example/a:1', auth)).toBe(true);
    expect(first.wasChecked('sha256:aa', 'r.example/a:1', { ...auth, password: 'other' })).toBe(false);
    expect(first.wasChecked('sha256:aa', 'r.example/a:2', auth)).toBe(false);
    await first.flushed();
    const text = await readFile(file, 'utf8');
    expect(JSON.parse(text)).toEqual({ version: 1, imageIds: ['sha256:aa'] });
    expect(text).not.toContain('secret-pw-123');
    expect((await stat(file)).mode & 0o777).toBe(0o600);

    const second = new PrivateImages({ file, logger: silentLogger });
    await second.load();
    expect(second.isPrivate('sha256:aa')).toBe(true);
    expect(second.isPrivate('sha256:bb')).toBe(false);
    expect(second.wasChecked('sha256:aa', 'r.example/a:1', auth)).toBe(false);
  });
});
