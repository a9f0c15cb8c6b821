import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PANEL_VERSION_HEADER } from '@tether/common';
import { PANEL_VERSION, buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createPrisma } from '../src/db/database.js';
import { ErrorBodySchema } from '../src/errors.js';
import { cliDownloadRoutes } from '../src/http/cli-download.js';
import { installErrorHandler } from '../src/http/error-handler.js';

// GET /cli/tether-cli.tgz without a token, and the version header on every
// answer. Installing the tarball and running it against a real panel is
// packages/infra-tests/test/cli-tarball.test.ts.

/** Names and sizes of the entries of a .tgz (ustar headers: name at 0, size in octal at 124). */
function entries(tgz: Buffer): Map<string, number> {
  const tar = gunzipSync(tgz);
  const found = new Map<string, number>();
  for (let at = 0; at + 512 <= tar.length; ) {
    const header = tar.subarray(at, at + 512);
    if (header.every((b) => b === 0)) break;
    const name = header.subarray(0, 100).toString('utf8').replace(/\0.*$/s, '');
    const prefix = header.subarray(345, 500).toString('utf8').replace(/\0.*$/s, '');
    const size = parseInt(header.subarray(124, 136).toString('utf8').replace(/\0.*$/s, '').trim() || '0', 8);
    if (header[156] === 0x30 || header[156] === 0) found.set(prefix ? `${prefix}/${name}` : name, size);
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return found;
}

let app: FastifyInstance;

beforeAll(async () => {
  app = await buildApp({ config: loadConfig({ TETHER_LOG_LEVEL: 'silent' }), prisma: createPrisma('postgresql://nobody:x@127.0.0.1:1/none') });
});
afterAll(async () => {
  await app?.close();
});

describe('GET /cli/tether-cli.tgz', () => {
  it('answers without a token: the npm tarball of the bundled CLI, with an ETag that makes a repeat 304', async () => {
    const res = await app.inject({ method: 'GET', url: '/cli/tether-cli.tgz' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/gzip');
    expect(res.headers['content-disposition']).toBe(`attachment; filename="tether-cli-${PANEL_VERSION}.tgz"`);
    const files = entries(res.rawPayload);
    expect([...files.keys()].sort()).toEqual(['package/README.md', 'package/bin/tether.mjs', 'package/dist/tether.mjs', 'package/dist/tether.mjs.LEGAL.txt', 'package/package.json']);
    // The bundle carries undici and @tether/common: it is far larger than the CLI's own code.
    expect(files.get('package/dist/tether.mjs')).toBeGreaterThan(500_000);
    const again = await app.inject({ method: 'GET', url: '/cli/tether-cli.tgz', headers: { 'if-none-match': res.headers.etag as string } });
    expect(again.statusCode).toBe(304);
    expect(again.rawPayload.length).toBe(0);
  });

  it('every answer names the panel version, errors too', async () => {
    for (const url of ['/healthz', '/v1/services', '/cli/tether-cli.tgz', '/nope']) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.headers[PANEL_VERSION_HEADER], url).toBe(PANEL_VERSION);
    }
  });

  it('a panel installed without the CLI answers 404 CLI_UNAVAILABLE saying so', async () => {
    const empty = mkdtempSync(path.join(os.tmpdir(), 'tether-no-cli-'));
    const bare = Fastify({ logger: false });
    try {
      bare.addSchema(ErrorBodySchema);
      installErrorHandler(bare);
      await bare.register(cliDownloadRoutes, { packageDir: empty });
      const res = await bare.inject({ method: 'GET', url: '/cli/tether-cli.tgz' });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: { code: 'CLI_UNAVAILABLE', message: expect.stringContaining('without the tether CLI') } });
    } finally {
      await bare.close();
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
