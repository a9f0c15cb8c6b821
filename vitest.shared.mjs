// Shared vitest settings for every package. Each package also writes a JSON
// report to .test-results/<package>.json, which scripts/tether.mjs sums into
// the plain "N passed, N failed" line that CI reads.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.dirname(fileURLToPath(import.meta.url));

const INCLUDE = ['test/**/*.test.ts', 'src/**/*.test.ts'];

/**
 * @param {string} name
 * @param {Record<string, unknown>} overrides
 * @param {{ splitFast?: string }} options `splitFast`: the package's folder; its
 *   files without I/O (`fastFiles`) then run as a project of their own without
 *   isolation (one import of the modules for all of them), the rest as before.
 *   `ioIsolate: false`: the rest runs without isolation too (each worker imports
 *   the package's modules once, not once per file). Only for a package whose
 *   code binds nothing at import (DESIGN.md) and whose tests restore what they
 *   change (timers, env).
 */
export function testConfig(name, overrides = {}, options = {}) {
  const base = {
    include: INCLUDE,
    reporters: ['default', 'json'],
    outputFile: { json: path.join(root, '.test-results', `${name}.json`) },
    testTimeout: 30_000,
    hookTimeout: 120_000,
    ...overrides,
  };
  if (!options.splitFast) return base;
  const fast = fastFiles(options.splitFast);
  if (fast.length === 0) return base;
  // Not `extends: true`: it would add the projects' include lists to the package's own.
  const { reporters, outputFile, include, ...perProject } = base;
  return {
    reporters,
    outputFile,
    projects: [
      { test: { ...perProject, name: `${name}:fast`, include: fast, isolate: false } },
      { test: { ...perProject, name: `${name}:io`, include, exclude: fast, ...(options.ioIsolate === false ? { isolate: false } : {}) } },
    ],
  };
}

// The fast suite (`npm run test:fast`, issue 35): every test file that does no
// I/O, found by content so that new files join by themselves. A file is "io"
// when it names a socket, a process, the file system, Docker, Postgres, the
// testkit or the test helpers (which start those), or mocks modules (shared
// module state: such a file needs its own isolation).
const IO_MARKERS = [
  /@tether\/testkit/,
  /['"]node:(net|http|https|http2|dgram|dns|dns\/promises|tls|child_process|fs|fs\/promises|worker_threads|cluster)['"]/,
  /from ['"](dockerode|ws|pg|undici|playwright-core|@tether\/embedded-postgres)['"]/,
  /helpers\//,
  /\bfetch\(/,
  /vi\.mock\(/,
];

function testFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist') continue;
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...testFiles(file));
    else if (entry.name.endsWith('.test.ts')) out.push(file);
  }
  return out;
}

/** The test files of the package in `packageDir` that do no I/O, relative to it. */
export function fastFiles(packageDir) {
  const files = ['test', 'src'].filter((d) => existsSync(path.join(packageDir, d))).flatMap((d) => testFiles(path.join(packageDir, d)));
  return files.filter((f) => !IO_MARKERS.some((m) => m.test(readFileSync(f, 'utf8')))).map((f) => path.relative(packageDir, f));
}

/** Every package with a vitest config, as `{ name, dir }`. */
export function testedPackages() {
  return ['apps', 'packages'].flatMap((group) =>
    readdirSync(path.join(root, group))
      .map((name) => ({ name, dir: path.join(root, group, name) }))
      .filter((p) => existsSync(path.join(p.dir, 'vitest.config.ts'))),
  );
}
