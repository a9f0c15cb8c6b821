import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dockerApi, imageExists } from './docker.js';

// An image that runs a Node script: this machine's node binary, the shared
// objects `ldd` names for it, and the packages the caller hands over (no
// registry is reachable, and busybox cannot speak WebSocket). The tag hashes
// what goes in, so a changed script makes a new image.

function sharedLibraries(binary: string): string[] {
  const out = execFileSync('ldd', [binary], { encoding: 'utf8' });
  return [...out.matchAll(/(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/g)].map((m) => m[1] as string);
}

const built = new Map<string, Promise<string>>();

/**
 * Builds (once per machine) `repo:<hash>` running `script` as /app/server.js; `modules` are package
 * folders copied to /app/node_modules/<name> (require them by that path).
 */
export function nodeScriptImage(repo: string, script: string, modules: Record<string, { dir: string; version: string }> = {}): Promise<string> {
  const names = Object.keys(modules).sort();
  const fingerprint = createHash('sha256')
    .update(`${process.execPath} ${process.version} ${names.map((n) => `${n}@${modules[n]!.version}`).join(',')}\n${script}`)
    .digest('hex')
    .slice(0, 12);
  const tag = `${repo}:${fingerprint}`;
  let image = built.get(tag);
  if (!image) {
    image = (async () => {
      if (await imageExists(tag)) return tag;
      const root = mkdtempSync(path.join(os.tmpdir(), 'tether-node-image-'));
      try {
        for (const file of [process.execPath, ...sharedLibraries(process.execPath)]) {
          const target = path.join(root, file);
          mkdirSync(path.dirname(target), { recursive: true });
          copyFileSync(file, target);
          chmodSync(target, 0o755);
        }
        for (const name of names) cpSync(modules[name]!.dir, path.join(root, 'app/node_modules', name), { recursive: true, dereference: true });
        mkdirSync(path.join(root, 'app'), { recursive: true });
        writeFileSync(path.join(root, 'app/server.js'), script);
        mkdirSync(path.join(root, 'tmp'), { mode: 0o1777 });
        const tar = spawn('tar', ['-C', root, '--numeric-owner', '--owner=0', '--group=0', '-c', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
        const [name, version] = tag.split(':') as [string, string];
        const query = new URLSearchParams({ fromSrc: '-', repo: name, tag: version, changes: `CMD ["${process.execPath}", "/app/server.js"]` });
        const res = await dockerApi('POST', `/images/create?${query.toString()}`, tar.stdout, 'application/x-tar');
        if (res.status !== 200 || /"error"/.test(res.body)) throw new Error(`docker import of ${tag} failed: ${res.status} ${res.body}`);
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
      return tag;
    })();
    built.set(tag, image);
  }
  return image;
}
