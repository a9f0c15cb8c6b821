import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { dockerApi } from '@tether/testkit';

// A customer service for end-to-end routing tests: one container that answers
// plain HTTP with its hostname (Docker sets it to the container id, so a test
// can tell which container Caddy reached) and echoes WebSocket messages.
//
// Busybox cannot speak WebSocket (client frames are masked, so echoing needs
// real framing), no registry is reachable, and a compiler may be missing on a
// fresh machine. Node is always there (it runs the tests), so the image holds
// this machine's node binary, the shared objects `ldd` names for it, and the
// real `ws` package the panel itself uses.

export const ECHO_PORT = 8080;

const SERVER = `
const http = require('node:http');
const os = require('node:os');
const { WebSocketServer } = require('/app/node_modules/ws');
const server = http.createServer((req, res) => res.end(os.hostname() + '\\n'));
const wss = new WebSocketServer({ server });
wss.on('connection', (socket) => {
  socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }));
  socket.on('error', () => undefined);
});
server.listen(${ECHO_PORT});
// PID 1 gets no default SIGTERM handler: without this, every replace waits for the stop timeout.
process.on('SIGTERM', () => process.exit(0));
`;

const require = createRequire(import.meta.url);

function sharedLibraries(binary: string): string[] {
  const out = execFileSync('ldd', [binary], { encoding: 'utf8' });
  return [...out.matchAll(/(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/g)].map((m) => m[1] as string);
}

let image: Promise<string> | undefined;

/** Builds (once per machine and node binary; the tag hashes what goes in) and names the echo image. */
export function ensureEchoImage(): Promise<string> {
  image ??= (async () => {
    const wsDir = path.dirname(require.resolve('ws/package.json'));
    const wsVersion = (require('ws/package.json') as { version: string }).version;
    const fingerprint = createHash('sha256').update(`${process.execPath} ${process.version} ws@${wsVersion}\n${SERVER}`).digest('hex').slice(0, 12);
    const tag = `tether-test/echo:${fingerprint}`;
    if ((await dockerApi('GET', `/images/${encodeURIComponent(tag)}/json`)).status === 200) return tag;

    const root = mkdtempSync(path.join(os.tmpdir(), 'tether-echo-image-'));
    try {
      for (const file of [process.execPath, ...sharedLibraries(process.execPath)]) {
        const target = path.join(root, file);
        mkdirSync(path.dirname(target), { recursive: true });
        copyFileSync(file, target);
        chmodSync(target, 0o755);
      }
      cpSync(wsDir, path.join(root, 'app/node_modules/ws'), { recursive: true, dereference: true });
      writeFileSync(path.join(root, 'app/server.js'), SERVER);
      mkdirSync(path.join(root, 'tmp'), { mode: 0o1777 });
      const tar = spawn('tar', ['-C', root, '--numeric-owner', '--owner=0', '--group=0', '-c', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
      const [repo, version] = tag.split(':') as [string, string];
      const query = new URLSearchParams({ fromSrc: '-', repo, tag: version, changes: `CMD ["${process.execPath}", "/app/server.js"]` });
      const res = await dockerApi('POST', `/images/create?${query.toString()}`, tar.stdout, 'application/x-tar');
      if (res.status !== 200 || /"error"/.test(res.body)) throw new Error(`docker import of ${tag} failed: ${res.status} ${res.body}`);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
    return tag;
  })();
  return image;
}
