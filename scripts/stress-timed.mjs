#!/usr/bin/env node
// Runs each test case that asserts a wall-clock bound (scripts/timed-cases.json,
// made by scripts/timed-cases.mjs) many times while busy loops keep every core
// loaded, one `vitest run FILE -t CASE` per run, and sums up the failures.
//   node scripts/stress-timed.mjs [--runs 20] [--load N] [--match TEXT] [--limit N] [--minutes M] [--list]
// --load: busy loops (default: one per core); --match: only cases whose
// package, file or name contains TEXT (several: A|B); --limit: at most N
// cases; --minutes: start no new case after M minutes.
// Heavy: run it under `flock /tmp/tether-heavy.lock`. The summary is also
// written to .test-results/stress-timed.json.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const resultsDir = path.join(root, '.test-results');

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : process.argv[i + 1];
}

const runs = Number(option('runs', '20'));
const load = Number(option('load', String(os.availableParallelism())));
const match = option('match', '');
const limit = Number(option('limit', 'Infinity'));
const minutes = Number(option('minutes', 'Infinity'));
const cases = JSON.parse(readFileSync(path.join(root, 'scripts', 'timed-cases.json'), 'utf8'))
  .filter((c) => match.split('|').some((m) => `${c.package}/${c.file} ${c.name}`.includes(m)))
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
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    stopBurners();
    process.exit(130);
  });
}
process.on('exit', stopBurners);

mkdirSync(resultsDir, { recursive: true });
const report = path.join(resultsDir, 'stress-run.json');
const summary = [];
const started = Date.now();
for (const [index, c] of cases.entries()) {
  if (Date.now() - started > minutes * 60_000) {
    console.log(`--minutes ${minutes} reached: ${cases.length - index} cases not run`);
    break;
  }
  const entry = { ...c, runs: 0, failed: 0, notRun: 0, failures: [], seconds: 0 };
  const t0 = Date.now();
  for (let run = 1; run <= runs; run++) {
    rmSync(report, { force: true });
    const result = spawnSync(
      'npx',
      ['vitest', 'run', c.file, '-t', titlePattern(c.name), '--reporter=dot', `--outputFile.json=${report}`, '--reporter=json'],
      { cwd: path.join(root, c.package), encoding: 'utf8', env: process.env },
    );
    entry.runs += 1;
    const json = existsSync(report) ? JSON.parse(readFileSync(report, 'utf8')) : null;
    if (!json || json.numPassedTests + json.numFailedTests === 0) {
      entry.notRun += 1;
      entry.failures.push(`run ${run}: no test ran (exit ${result.status}): ${(result.stderr || result.stdout).trim().split('\n').slice(-3).join(' | ')}`);
      break; // a title that matches nothing will not match on the next run either
    }
    if (json.numFailedTests > 0 || result.status !== 0) {
      entry.failed += 1;
      const messages = json.testResults
        .flatMap((r) => r.assertionResults ?? [])
        .filter((a) => a.status === 'failed')
        .map((a) => (a.failureMessages ?? [])[0]?.split('\n')[0] ?? 'failed');
      entry.failures.push(`run ${run}: ${messages.join(' / ') || `exit ${result.status}`}`);
    }
  }
  entry.seconds = Math.round((Date.now() - t0) / 1000);
  summary.push(entry);
  const verdict = entry.notRun ? 'NOT RUN' : `${entry.failed}/${entry.runs} failed`;
  console.log(`[${index + 1}/${cases.length}] ${verdict.padEnd(12)} ${entry.seconds}s  ${c.package}/${c.file} :: ${c.name}`);
  for (const f of entry.failures) console.log(`      ${f}`);
}
stopBurners();
rmSync(report, { force: true });

const failedCases = summary.filter((e) => e.failed > 0 || e.notRun > 0);
writeFileSync(
  path.join(resultsDir, 'stress-timed.json'),
  JSON.stringify({ runs, load, loadavg: os.loadavg(), seconds: Math.round((Date.now() - started) / 1000), cases: summary }, null, 2),
);
console.log(`\n${summary.length} timed cases × ${runs} runs under ${load} busy loops: ${failedCases.length} with failures`);
for (const e of failedCases) console.log(`✖ ${e.package}/${e.file} :: ${e.name} (${e.failed} failed, ${e.notRun} not run)`);
process.exit(failedCases.length === 0 ? 0 : 1);
