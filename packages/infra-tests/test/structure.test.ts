import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '@tether/testkit';

// The shape of the tree (docs/architecture.md, "Where things happen"): an app
// never reaches into another app's files, and a bench script reaches into an
// app's source only where bench/README.md says why. Imports are read as text
// (static `from '…'`, `import('…')`), so a violation fails here before it can
// tie two apps together.

const SOURCE = /\.(?:[cm]?ts|tsx|[cm]?js)$/;
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"]([^'"]+)['"]/g;

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name === 'generated' || name.startsWith('.')) continue;
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sourceFiles(full));
    else if (SOURCE.test(name) && !name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

function importsOf(text: string): string[] {
  return [...text.matchAll(SPECIFIER)].map((m) => m[1]!);
}

/** The app folder (`apps/<name>`) a path lies in, or null. */
function appOf(file: string): string | null {
  const rel = path.relative(repoRoot, file).split(path.sep);
  return rel[0] === 'apps' && rel[1] ? rel[1] : null;
}

const APPS = readdirSync(path.join(repoRoot, 'apps')).filter((n) => statSync(path.join(repoRoot, 'apps', n)).isDirectory());
const APP_PACKAGES = new Map(APPS.map((app) => [JSON.parse(readFileSync(path.join(repoRoot, 'apps', app, 'package.json'), 'utf8')).name as string, app]));

/** Where an import lands: an app's folder and the path inside it, when it lands in an app. */
function target(from: string, specifier: string): { app: string; inner: string } | null {
  if (specifier.startsWith('.')) {
    const resolved = path.resolve(path.dirname(from), specifier);
    const app = appOf(resolved);
    return app ? { app, inner: path.relative(path.join(repoRoot, 'apps', app), resolved) } : null;
  }
  for (const [pkg, app] of APP_PACKAGES) {
    if (specifier === pkg) return { app, inner: '' };
    if (specifier.startsWith(`${pkg}/`)) return { app, inner: specifier.slice(pkg.length + 1) };
  }
  return null;
}

describe('imports between apps', () => {
  it('reads the import forms it is meant to catch', () => {
    expect(importsOf("import type { X } from '../../control-panel/src/x';\nconst m = await import('../a.js');\nimport './side-effect.js';")).toEqual([
      '../../control-panel/src/x',
      '../a.js',
      './side-effect.js',
    ]);
  });

  it('no app imports another app’s files (shared types and code live in packages/)', () => {
    const offences: string[] = [];
    for (const app of APPS) {
      for (const file of sourceFiles(path.join(repoRoot, 'apps', app))) {
        for (const specifier of importsOf(readFileSync(file, 'utf8'))) {
          const t = target(file, specifier);
          // A package import of another app's entry point is how its tests run it (a process), not a tie to its source.
          if (t && t.app !== app && (specifier.startsWith('.') || t.inner.startsWith('src'))) {
            offences.push(`${path.relative(repoRoot, file)} imports ${specifier}`);
          }
        }
      }
    }
    expect(offences).toEqual([]);
  });

  it('a bench script imports an app’s source only where bench/README.md names it and says why', () => {
    const readme = readFileSync(path.join(repoRoot, 'bench', 'README.md'), 'utf8');
    const section = readme.split(/^## /m).find((s) => s.startsWith('Imports of app sources')) ?? '';
    const offences: string[] = [];
    for (const file of sourceFiles(path.join(repoRoot, 'bench'))) {
      const reachesIn = importsOf(readFileSync(file, 'utf8')).some((s) => target(file, s) !== null);
      if (reachesIn && !section.includes(`\`${path.basename(file)}\``)) offences.push(path.relative(repoRoot, file));
    }
    expect(offences).toEqual([]);
  });
});

describe('agent frames on the panel', () => {
  // Where a frame of type X goes is apps/control-panel/src/sessions/frame-router.ts: one handler per type,
  // registered beside its code. A second `switch` on a frame's type would be a second answer to that question.
  // (The host agent still routes panel frames in connection/panel-connection.ts; it joins this rule when its
  // own router lands, issue 27.)
  const SWITCH_ON_TYPE = /switch\s*\(\s*[\w.]*\btype\s*\)/;

  it('reads the switch it is meant to catch', () => {
    expect(SWITCH_ON_TYPE.test('switch (message.type) {')).toBe(true);
    expect(SWITCH_ON_TYPE.test('switch(m.type){')).toBe(true);
    expect(SWITCH_ON_TYPE.test('switch (kind) {')).toBe(false);
  });

  it('no panel source switches on a frame’s type', () => {
    const offences = sourceFiles(path.join(repoRoot, 'apps', 'control-panel', 'src'))
      .filter((file) => SWITCH_ON_TYPE.test(readFileSync(file, 'utf8')))
      .map((file) => path.relative(repoRoot, file));
    expect(offences).toEqual([]);
  });
});
