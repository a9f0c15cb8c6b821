import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

// The fleet page's built files (apps/dashboard, built by Vite with everything
// else), read once at start and served from memory: a few small files, no CDN.

export interface StaticFile {
  body: Buffer;
  type: string;
  /** Vite names assets by content hash: cache them for good. */
  immutable: boolean;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
};

/** Where the dashboard package's build output is; undefined when the package is not installed. */
export function dashboardDist(): string | undefined {
  try {
    const pkg = createRequire(import.meta.url).resolve('@tether/dashboard/package.json');
    return path.join(path.dirname(pkg), 'dist');
  } catch {
    return undefined;
  }
}

/** Every file under `dir`, keyed by its path relative to it with `/` separators. */
export function loadStaticFiles(dir: string | undefined): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>();
  if (!dir || !existsSync(dir)) return files;
  const walk = (sub: string) => {
    for (const name of readdirSync(path.join(dir, sub))) {
      const rel = sub ? `${sub}/${name}` : name;
      const full = path.join(dir, rel);
      if (statSync(full).isDirectory()) walk(rel);
      else files.set(rel, { body: readFileSync(full), type: TYPES[path.extname(name)] ?? 'application/octet-stream', immutable: rel.startsWith('assets/') });
    }
  };
  walk('');
  return files;
}
