import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { routingHash, type Route } from '@tether/protocol';
import type { RoutingMapInput } from '../../../src/controllers.js';

export const silentLogger = pino({ level: 'silent' });

const dirs: string[] = [];

export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-proxy-'));
  dirs.push(dir);
  return dir;
}

export async function removeTempDirs(): Promise<void> {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
}

export function route(domain: string, upstream: string, pathPrefix: string | null = null): Route {
  return { domain, pathPrefix, serviceId: `svc_${domain.split('.')[0]}`, upstream };
}

export function mapOf(routes: Route[], version = 1): RoutingMapInput {
  return { version, hash: routingHash(routes), routes };
}

/** Changes whenever the file is replaced (new inode) or written in place (mtime, size). */
export { fileStamp as fileIdentity } from '../../../src/state/atomic-file.js';

/** GET through Caddy's HTTP port with a Host header (fetch cannot set Host). */
export function httpGet(port: number, host: string, urlPath = '/'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: urlPath, headers: { host }, agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.setTimeout(5_000, () => req.destroy(new Error('GET timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** An upstream service that answers every request with `name` and the path it saw. */
export function startNamedServer(name: string): Promise<{ port: number; close(): Promise<void> }> {
  return startNamedServerAt('127.0.0.1', name);
}

/** The same on `host` (container tests: a Docker network's gateway address, which containers on it reach). */
export async function startNamedServerAt(host: string, name: string): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => res.end(`${name} ${req.url}`));
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
