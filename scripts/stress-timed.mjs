#!/usr/bin/env node
// Runs each test case that asserts a wall-clock bound (scripts/timed-cases.json,
// made by scripts/timed-cases.mjs) many times while busy loops keep every core
// loaded (one `vitest run FILE -t CASES` per file and run), and sums up the failures.
//   node scripts/stress-timed.mjs [--runs 20] [--load N] [--external-load N] [--match TEXT] [--limit N] [--minutes M] [--per-case] [--pending] [--list]
// --load: busy loops (default: one per core); --external-load: busy loops
// started outside this run and kept up for all of it (two runs sharing one
// set of loops pass --load 0 --external-load 2), recorded in the ledger with
// the own ones; --match: only cases whose
// package, file or name contains TEXT (several: A|B); --limit: at most N
// cases; --minutes: start no new case after M minutes; --pending: only cases
// without a clean entry in scripts/stress-ledger.json (runs of 20 or more
// are recorded there).
// Heavy: run it under `flock /tmp/tether-heavy.lock`. The summary is also
// written to .test-results/stress-timed.json.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { caseTitles } from './timed-cases.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const resultsDir = path.join(root, '.test-results');

const KNOWN = new Set(['--runs', '--load', '--external-load', '--match', '--limit', '--minutes', '--per-case', '--pending', '--list']);
const VALUED = new Set(['--runs', '--load', '--external-load', '--match', '--limit', '--minutes']);
for (let i = 2; i < process.argv.length; i++) {
  const arg = process.argv[i];
  if (!KNOWN.has(arg)) {
    // An unknown flag must not start hours of loaded runs.
    console.error(`stress-timed: unknown argument ${arg}; see the comment at the top of scripts/stress-timed.mjs`);
    process.exit(2);
  }
  if (VALUED.has(arg)) i += 1;
}

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : process.argv[i + 1];
}

const runs = Number(option('runs', '20'));
const load = Number(option('load', String(os.availableParallelism())));
const externalLoad = Number(option('external-load', '0'));
const match = option('match', '');
const limit = Number(option('limit', 'Infinity'));
const minutes = Number(option('minutes', 'Infinity'));
// What each case's last full stress run found, kept in the repo so the whole
// list (hours of the machine) can be covered across sessions: --pending skips
// the cases whose last entry is `runs` runs with no failure on a file
// unchanged since (same blob hash of the test file).
const ledgerFile = path.join(root, 'scripts', 'stress-ledger.json');
const ledger = existsSync(ledgerFile) ? JSON.parse(readFileSync(ledgerFile, 'utf8')) : {};
const keyOf = (c) => `${c.package}/${c.file} :: ${c.name}`;
const blobOf = (c) => spawnSync('git', ['hash-object', path.join(c.package, c.file)], { cwd: root, encoding: 'utf8' }).stdout.trim();
const pending = process.argv.includes('--pending');
const cases = JSON.parse(readFileSync(path.join(root, 'scripts', 'timed-cases.json'), 'utf8'))
  .filter((c) => match.split('|').some((m) => `${c.package}/${c.file} ${c.name}`.includes(m)))
  .filter((c) => {
    const last = ledger[keyOf(c)];
    return !pending || !last || last.failed > 0 || last.runs < runs || last.blob !== blobOf(c);
  })
  .slice(0, limit);

if (process.argv.includes('--list')) {
  for (const c of cases) console.log(`${c.package}/${c.file} :: ${c.name}`);
  process.exit(0);
}

// The case's title as a -t pattern: regex characters escaped, a ${...}
// interpolation in the source matches anything in the run-time title.
function titlePattern(name) {
  return name
    .replace(/\\(.)/g, '$1')
    .split(/\$\{(?:[^{}]|\{[^{}]*\})*\}/)
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
}

// Busy loops on every core: timing bounds must hold on a machine that is
// doing something else too.
const burners = Array.from({ length: load }, () =>
  spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }),
);
function stopBurners() {
  for (const b of burners) if (b.exitCode === null) b.kill('SIGKILL');
}
// The first signal stops the run after the vitest run in progress, which
// then tears down what it set up (containers, namespaces, iptables rules);
// a second one exits at once. Runs are awaited, not spawnSync'd, so that the
// handler gets to run at all.
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    if (stopping) {
      stopBurners();
      process.exit(130);
    }
    stopping = true;
    console.log(`${signal}: stopping after the run in progress; the file it belongs to is not recorded`);
  });
}
// The pnpm of the repo's packageManager, first on PATH: under `npm test` turbo runs each package's tests with
// pnpm, and a test that runs pnpm itself (infra-tests' first-hour builds a checkout) takes that one; under npx
// (which sets npm_execpath to npm's) it looks for a pnpm on PATH, which a machine with only Node and npm lacks.
const { packageManager } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const pnpmBin = spawnSync('npm', ['exec', '--yes', `--package=${packageManager}`, '-c', 'command -v pnpm'], { cwd: os.tmpdir(), encoding: 'utf8' }).stdout.trim();
function vitest(args, cwd) {
  return new Promise((resolve) => {
    // As in CI: a dependency that is missing or does not answer fails the run instead of skipping the file.
    const env = { ...process.env, CI: 'true', ...(pnpmBin ? { PATH: `${path.dirname(pnpmBin)}${path.delimiter}${process.env.PATH ?? ''}` } : {}) };
    const child = spawn('npx', ['vitest', ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}
process.on('exit', stopBurners);

mkdirSync(resultsDir, { recursive: true });
const report = path.join(resultsDir, `stress-run-${process.pid}.json`);

// A file's timed cases go in one `vitest run FILE -t PATTERN` per run: its
// setup (Postgres, Docker, Caddy) is paid once for all of them, and each case
// is still judged on its own from the JSON report. The pattern names every
// case of the file up to its last timed one, in the file's order: cases often
// build on the ones before them (remote-routing's first case applies the
// routes the next three stop and restart; alone, those failed 20 of 20 for
// that reason only). A case before them that fails is reported as the run's
// setup failing. --per-case runs each timed case alone in its own process.
const perCase = process.argv.includes('--per-case');
const groups = [];
for (const c of cases) {
  const key = `${c.package}/${c.file}`;
  const last = groups.at(-1);
  if (!perCase && last && last.key === key) last.cases.push(c);
  else groups.push({ key, package: c.package, file: c.file, cases: [c] });
}

const summary = [];
const started = Date.now();
let done = 0;
for (const [index, group] of groups.entries()) {
  if (Date.now() - started > minutes * 60_000) {
    console.log(`--minutes ${minutes} reached: ${cases.length - done} cases in ${groups.length - index} files not run`);
    break;
  }
  const patterns = group.cases.map((c) => new RegExp(titlePattern(c.name)));
  const titles = caseTitles(path.join(root, group.package, group.file));
  const lastTimed = Math.max(...group.cases.map((c) => titles.indexOf(c.name)));
  const before = perCase || lastTimed < 0 ? [] : titles.slice(0, lastTimed + 1).filter((t) => !group.cases.some((c) => c.name === t)).map((t) => new RegExp(titlePattern(t)));
  const all = [...patterns, ...before];
  const filter = all.length === 1 ? all[0].source : all.map((p) => `(?:${p.source})`).join('|');
  const entries = group.cases.map((c) => ({ ...c, runs: 0, failed: 0, notRun: 0, failures: [], seconds: 0 }));
  const t0 = Date.now();
  for (let run = 1; run <= runs; run++) {
    rmSync(report, { force: true });
    const result = await vitest(['run', group.file, '-t', filter, '--reporter=dot', `--outputFile.json=${report}`, '--reporter=json'], path.join(root, group.package));
    if (stopping) break;
    const json = existsSync(report) ? JSON.parse(readFileSync(report, 'utf8')) : null;
    const results = (json?.testResults ?? []).flatMap((r) => r.assertionResults ?? []).filter((a) => a.status === 'passed' || a.status === 'failed');
    for (const [i, entry] of entries.entries()) {
      if (entry.notRun) continue;
      entry.runs += 1;
      const mine = results.filter((a) => patterns[i].test(a.fullName ?? a.title));
      if (mine.length === 0) {
        // A title that matches nothing will not match on the next run either.
        entry.notRun += 1;
        entry.failures.push(`run ${run}: no test ran (exit ${result.status}): ${(result.stderr || result.stdout).trim().split('\n').slice(-3).join(' | ')}`);
        continue;
      }
      const failed = mine.filter((a) => a.status === 'failed');
      if (failed.length > 0) {
        entry.failed += 1;
        entry.failures.push(`run ${run}: ${failed.map((a) => (a.failureMessages ?? [])[0]?.split('\n')[0] ?? 'failed').join(' / ')}`);
      }
    }
    // A case the timed ones build on failed: their run counts as failed, with its name.
    const setup = results.filter((a) => a.status === 'failed' && before.some((p) => p.test(a.fullName ?? a.title)) && !patterns.some((p) => p.test(a.fullName ?? a.title)));
    if (setup.length > 0) {
      for (const entry of entries) {
        if (entry.notRun || entry.failures.some((f) => f.startsWith(`run ${run}:`))) continue;
        entry.failed += 1;
        entry.failures.push(`run ${run}: a case before it failed: ${setup.map((a) => `${a.title}: ${(a.failureMessages ?? [])[0]?.split('\n')[0] ?? 'failed'}`).join(' / ')}`);
      }
    }
    // A failed hook or a crashed run with every case passing is still a failure, of the file.
    if (result.status !== 0 && entries.every((e) => e.failures.every((f) => !f.startsWith(`run ${run}:`)))) {
      for (const entry of entries) {
        if (entry.notRun) continue;
        entry.failed += 1;
        entry.failures.push(`run ${run}: exit ${result.status} with its cases passing: ${(result.stderr || '').trim().split('\n').slice(-2).join(' | ')}`);
      }
    }
    if (entries.every((e) => e.notRun)) break;
  }
  if (stopping) break;
  const seconds = Math.round((Date.now() - t0) / 1000);
  const blob = blobOf(group.cases[0]);
  const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout.trim();
  for (const entry of entries) {
    entry.seconds = seconds;
    summary.push(entry);
    if (runs >= 20 && !entry.notRun) {
      const at = new Date().toISOString().slice(0, 16);
      // Read again before writing: another run may have recorded cases meanwhile (its entries are kept).
      const latest = existsSync(ledgerFile) ? JSON.parse(readFileSync(ledgerFile, 'utf8')) : {};
      latest[keyOf(entry)] = { runs: entry.runs, failed: entry.failed, load: load + externalLoad, at, commit, blob, failures: entry.failures.slice(0, 3) };
      writeFileSync(ledgerFile, `${JSON.stringify(Object.fromEntries(Object.entries(latest).sort()), null, 1)}\n`);
    }
    done += 1;
    const verdict = entry.notRun ? 'NOT RUN' : `${entry.failed}/${entry.runs} failed`;
    console.log(`[${done}/${cases.length}] ${verdict.padEnd(12)} ${seconds}s  ${entry.package}/${entry.file} :: ${entry.name}`);
    for (const f of entry.failures) console.log(`      ${f}`);
  }
}
stopBurners();
rmSync(report, { force: true });

const failedCases = summary.filter((e) => e.failed > 0 || e.notRun > 0);
writeFileSync(
  path.join(resultsDir, 'stress-timed.json'),
  JSON.stringify({ runs, load: load + externalLoad, loadavg: os.loadavg(), seconds: Math.round((Date.now() - started) / 1000), cases: summary }, null, 2),
);
console.log(`\n${summary.length} timed cases × ${runs} runs under ${load + externalLoad} busy loops: ${failedCases.length} with failures`);
for (const e of failedCases) console.log(`✖ ${e.package}/${e.file} :: ${e.name} (${e.failed} failed, ${e.notRun} not run)`);
process.exit(failedCases.length > 0 ? 1 : stopping ? 130 : 0);
