// The test cases that assert a wall-clock bound, kept in one place
// (scripts/timed-cases.json) for scripts/stress-timed.mjs.
//   node scripts/timed-cases.mjs          rewrite the list from the sources
//   node scripts/timed-cases.mjs --check  exit 1 when the list is out of date
// A case is timed when its body compares a measured time (a variable named
// like elapsed/took/waited/duration/ms, or Date.now()/performance.now()
// itself) with toBeLessThan*/toBeGreaterThan*/toBeWithin-style matchers.
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const listFile = path.join(root, 'scripts', 'timed-cases.json');
const BOUND =
  /expect\((?:[^()]|\([^()]*\))*(?:elapsed|took|waited|duration|Date\.now\(\)|performance\.now\(\)|\b\w*(?:Ms|ms|At|Time|time|Seconds)\b)(?:[^()]|\([^()]*\))*\)\.(?:not\.)?toBe(?:LessThan|GreaterThan)(?:OrEqual)?\(/;
const CASE = /^\s*(?:it|test)(?:\.each\([^)]*\))?\(\s*(['"`])((?:\\.|(?!\1).)*)\1/;

function walk(dir, out) {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (p.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

export function findTimedCases() {
  const cases = [];
  const files = [...walk(path.join(root, 'apps'), []), ...walk(path.join(root, 'packages'), [])].sort();
  for (const file of files) {
    let current = null;
    const seen = new Set();
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const start = line.match(CASE);
      if (start) current = start[2];
      if (current && BOUND.test(line) && !seen.has(current)) {
        seen.add(current);
        const rel = path.relative(root, file).split(path.sep).join('/');
        const pkg = rel.split('/').slice(0, 2).join('/');
        cases.push({ package: pkg, file: path.relative(pkg, rel), name: current });
      }
    }
  }
  return cases;
}

/** Every case title of a test file, in source order (it() and test() at any depth; .each titles as written). */
export function caseTitles(file) {
  const titles = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const start = line.match(CASE);
    if (start) titles.push(start[2]);
  }
  return titles;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = `${JSON.stringify(findTimedCases(), null, 2)}\n`;
  if (process.argv.includes('--check')) {
    const current = existsSync(listFile) ? readFileSync(listFile, 'utf8') : '';
    if (current !== text) {
      console.error('scripts/timed-cases.json is out of date: run node scripts/timed-cases.mjs');
      process.exit(1);
    }
  } else {
    writeFileSync(listFile, text);
    console.log(`${JSON.parse(text).length} timed cases written to scripts/timed-cases.json`);
  }
}
