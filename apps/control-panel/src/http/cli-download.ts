import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyPluginAsync } from 'fastify';
import { create as createTar } from 'tar';
import { AppError } from '../errors.js';

// GET /cli/tether-cli.tgz: the `tether` CLI that fits this panel, as an npm
// tarball anyone may fetch (it holds no secret), so a customer installs it
// with `npm install -g <panel>/cli/tether-cli.tgz`. It is packed on the first
// request from the @tether/cli package this panel was built with (a
// dependency, so its bundled dist/tether.mjs is in the panel's node_modules
// and its image) and kept in memory: the same bytes `npm pack` puts in
// tether-cli-<version>.tgz (the package.json, README and the package's
// `files` under `package/`), without needing npm where the panel runs.

export const CLI_TARBALL_PATH = '/cli/tether-cli.tgz';

export interface CliDownloadOptions {
  /** Folder of the @tether/cli package; found through node_modules when absent. */
  packageDir?: string;
}

interface Packed {
  bytes: Buffer;
  etag: string;
  version: string;
}

function cliPackageDir(): string | undefined {
  try {
    return path.dirname(createRequire(import.meta.url).resolve('@tether/cli/package.json'));
  } catch {
    return undefined;
  }
}

async function pack(dir: string | undefined): Promise<Packed> {
  const manifestFile = dir && path.join(dir, 'package.json');
  if (!manifestFile || !existsSync(manifestFile)) throw new AppError('CLI_UNAVAILABLE', 'this panel was installed without the tether CLI package (@tether/cli)');
  const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as { version: string; files?: string[] };
  if (!existsSync(path.join(dir, 'dist', 'tether.mjs'))) throw new AppError('CLI_UNAVAILABLE', 'the tether CLI was not built with this panel (its dist/tether.mjs is missing)');
  const entries = ['package.json', 'README.md', ...(manifest.files ?? [])].filter((f) => existsSync(path.join(dir, f)));
  const chunks: Buffer[] = [];
  // portable: no uid, gid, user names or device numbers of the machine that packed it.
  const stream = createTar({ gzip: true, cwd: dir, prefix: 'package', portable: true }, entries);
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
  const bytes = Buffer.concat(chunks);
  return { bytes, version: manifest.version, etag: `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"` };
}

export const cliDownloadRoutes: FastifyPluginAsync<CliDownloadOptions> = async (app, opts) => {
  const dir = opts.packageDir ?? cliPackageDir();
  let packed: Promise<Packed> | undefined;
  app.get(
    CLI_TARBALL_PATH,
    {
      schema: {
        tags: ['cli'],
        summary: 'The tether CLI fitting this panel, as an npm tarball (dependencies bundled); no token needed',
        response: {
          200: { description: 'tether-cli-<version>.tgz (application/gzip)', type: 'string', format: 'binary' },
          304: { description: 'not modified (If-None-Match matched the ETag)', type: 'null' },
          404: { $ref: 'ErrorBody#' },
        },
      },
    },
    async (request, reply) => {
      // One packing for concurrent first requests; a failed one is tried again next time.
      packed ??= pack(dir).catch((err: unknown) => {
        packed = undefined;
        throw err;
      });
      const cli = await packed;
      reply.header('etag', cli.etag).header('cache-control', 'no-cache');
      if (request.headers['if-none-match'] === cli.etag) return reply.code(304).send();
      return reply
        .type('application/gzip')
        .header('content-disposition', `attachment; filename="tether-cli-${cli.version}.tgz"`)
        .send(cli.bytes);
    },
  );
};
