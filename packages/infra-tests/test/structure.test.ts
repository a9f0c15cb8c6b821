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

describe('frames between panel and agent', () => {
  // Where a frame of type X goes is one router per side: the panel's apps/control-panel/src/sessions/frame-router.ts
  // (handlers registered beside their code) and the agent's apps/host-agent/src/connection/frame-router.ts (handlers
  // registered in panel-connection.ts). A second `switch` on a frame's type would be a second answer to that question.
  const SWITCH_ON_TYPE = /switch\s*\(\s*[\w.]*\btype\s*\)/;

  it('reads the switch it is meant to catch', () => {
    expect(SWITCH_ON_TYPE.test('switch (message.type) {')).toBe(true);
    expect(SWITCH_ON_TYPE.test('switch(m.type){')).toBe(true);
    expect(SWITCH_ON_TYPE.test('switch (kind) {')).toBe(false);
  });

  it('no source of either app switches on a frame’s type', () => {
    const offences = ['control-panel', 'host-agent']
      .flatMap((app) => sourceFiles(path.join(repoRoot, 'apps', app, 'src')))
      .filter((file) => SWITCH_ON_TYPE.test(readFileSync(file, 'utf8')))
      .map((file) => path.relative(repoRoot, file));
    expect(offences).toEqual([]);
  });
});

describe('inside each app', () => {
  /** `import … from '…'` with whether it is type-only (erased at build: it can tie no module to another at run time). */
  const IMPORT = /^\s*import\s+(type\s+)?[^;]*?\bfrom\s*['"]([^'"]+)['"]/gms;
  const importsWithKind = (text: string) => [...text.matchAll(IMPORT)].map((m) => ({ typeOnly: m[1] !== undefined, specifier: m[2]! }));
  const appSources = (app: string) => sourceFiles(path.join(repoRoot, 'apps', app, 'src')).filter((f) => !/\.test\.[cm]?ts$/.test(f));

  it('reads the import forms it is meant to catch', () => {
    expect(importsWithKind("import type { A } from '../config.js';\nimport { b,\n c } from '../agent.js';")).toEqual([
      { typeOnly: true, specifier: '../config.js' },
      { typeOnly: false, specifier: '../agent.js' },
    ]);
  });

  // Upward: a module in a folder of src/ that loads (not only names the types of) a module at src/'s root
  // which loads, directly or through others, a module of that same folder: the composition (main, app, agent,
  // agent-side) or a config built from the parts' defaults. Such an import is a cycle between a part and what
  // assembles it. Root modules that reach no module of the folder (error catalogs, event and metric names)
  // are leaves to it.
  it('no module of a folder loads a root module of its app that loads that folder (an upward import)', () => {
    const offences: string[] = [];
    for (const app of ['host-agent', 'control-panel']) {
      const src = path.join(repoRoot, 'apps', app, 'src');
      const files = new Set(appSources(app));
      const loads = new Map<string, string[]>();
      const local = (file: string) =>
        importsWithKind(readFileSync(file, 'utf8'))
          .filter((i) => i.specifier.startsWith('.'))
          .map((i) => ({ ...i, resolved: path.resolve(path.dirname(file), i.specifier).replace(/\.js$/, '.ts') }));
      for (const file of files) loads.set(file, local(file).filter((i) => !i.typeOnly && files.has(i.resolved)).map((i) => i.resolved));
      const reaches = (from: string, folder: string): boolean => {
        const seen = new Set<string>();
        const stack = [from];
        while (stack.length > 0) {
          const at = stack.pop()!;
          if (seen.has(at)) continue;
          seen.add(at);
          if (path.dirname(at).startsWith(folder)) return true;
          stack.push(...(loads.get(at) ?? []));
        }
        return false;
      };
      for (const file of files) {
        if (path.dirname(file) === src) continue;
        const folder = path.join(src, path.relative(src, file).split(path.sep)[0]!);
        for (const target of loads.get(file) ?? []) {
          if (path.dirname(target) === src && reaches(target, folder)) offences.push(`${path.relative(repoRoot, file)} loads ${path.relative(src, target)}`);
        }
      }
    }
    expect(offences).toEqual([]);
  });

  // Cycles, type imports included (a type is a dependency a reader follows): none between two files of an
  // app, none between its first-level folders (each root file counts as a folder of its own), so the layer
  // picture of docs/architecture.md has arrows that only point down. One check, run for each app.
  const noImportCycle = (app: string) => () => {
    const IMPORT_OR_EXPORT = /^\s*(?:import|export)\s+(?:type\s+)?[^;]*?\bfrom\s*['"]([^'"]+)['"]/gms;
    const src = path.join(repoRoot, 'apps', app, 'src');
    const graphOf = (files: string[], read: (file: string) => string) => {
      const known = new Set(files);
      return new Map(
        files.map((file) => [
          file,
          [...read(file).matchAll(IMPORT_OR_EXPORT)]
            .map((m) => m[1]!)
            .filter((s) => s.startsWith('.'))
            .map((s) => path.resolve(path.dirname(file), s).replace(/\.js$/, '.ts'))
            .filter((t) => known.has(t)),
        ]),
      );
    };
    /** The strongly connected components of more than one node (Tarjan): each is a cycle, named by its members. */
    const cycles = (graph: Map<string, string[]>): string[][] => {
      let next = 0;
      const index = new Map<string, number>();
      const low = new Map<string, number>();
      const stack: string[] = [];
      const onStack = new Set<string>();
      const found: string[][] = [];
      const visit = (v: string) => {
        index.set(v, next);
        low.set(v, next++);
        stack.push(v);
        onStack.add(v);
        for (const w of graph.get(v) ?? []) {
          if (!index.has(w)) {
            visit(w);
            low.set(v, Math.min(low.get(v)!, low.get(w)!));
          } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
        }
        if (low.get(v) !== index.get(v)) return;
        const component: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          component.push(w);
        } while (w !== v);
        if (component.length > 1) found.push(component.sort());
      };
      for (const v of graph.keys()) if (!index.has(v)) visit(v);
      return found;
    };
    /** A file's first-level folder under src/ (`sessions/`), or the root file itself. */
    const unitOf = (file: string) => {
      const parts = path.relative(src, file).split(path.sep);
      return parts.length > 1 ? `${parts[0]}/` : parts[0]!;
    };
    const foldersOf = (files: Map<string, string[]>) => {
      const graph = new Map<string, string[]>();
      for (const [file, targets] of files) {
        const from = unitOf(file);
        const out = graph.get(from) ?? [];
        for (const t of targets) if (unitOf(t) !== from && !out.includes(unitOf(t))) out.push(unitOf(t));
        graph.set(from, out);
      }
      return graph;
    };

    it('finds the cycles it is meant to catch, through type imports and re-exports too', () => {
      const f = (rel: string) => path.join(src, rel);
      const text: Record<string, string> = {
        [f('a/one.ts')]: "import type { B } from '../b/two.js';",
        [f('b/two.ts')]: "export { C } from './three.js';",
        [f('b/three.ts')]: "import { A } from '../a/four.js';",
        [f('a/four.ts')]: '',
        [f('c.ts')]: "import { B } from './b/two.js';",
      };
      const files = graphOf(Object.keys(text), (file) => text[file]!);
      expect(cycles(files)).toEqual([]);
      expect(cycles(foldersOf(files))).toEqual([['a/', 'b/']]);
      text[f('a/four.ts')] = "import type { X } from '../b/two.js';";
      expect(cycles(graphOf(Object.keys(text), (file) => text[file]!))).toEqual([[f('a/four.ts'), f('b/three.ts'), f('b/two.ts')]]);
    });

    it('between files, and between first-level folders', () => {
      const files = graphOf(
        sourceFiles(src).filter((f) => f.endsWith('.ts')),
        (file) => readFileSync(file, 'utf8'),
      );
      expect(cycles(files).map((c) => c.map((f) => path.relative(src, f)))).toEqual([]);
      expect(cycles(foldersOf(files))).toEqual([]);
    });
  };
  describe('the control panel has no import cycle', noImportCycle('control-panel'));
  describe('the host agent has no import cycle', noImportCycle('host-agent'));

  // Where the agent talks to Docker: one client per process, made by docker/docker-client.ts and only in
  // main.ts, then handed to every part (runtime, proxy container, endpoints, logs).
  it('the agent constructs dockerode in one place and makes its client once, in main.ts', () => {
    const constructs: string[] = [];
    const makes: string[] = [];
    for (const file of appSources('host-agent')) {
      const text = readFileSync(file, 'utf8');
      const rel = path.relative(path.join(repoRoot, 'apps', 'host-agent'), file);
      if (/\bnew\s+Docker\s*\(/.test(text)) constructs.push(rel);
      if (/\bcreateDockerClient\s*\(/.test(text) && rel !== path.join('src', 'docker', 'docker-client.ts')) makes.push(rel);
    }
    expect(constructs).toEqual([path.join('src', 'docker', 'docker-client.ts')]);
    expect(makes).toEqual([path.join('src', 'main.ts')]);
  });
});
