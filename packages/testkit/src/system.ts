import { execFile } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** Under CI nothing may skip for a missing system dependency: the kit installs it or the suite fails. */
export const isCI = process.env.CI === 'true' || process.env.CI === '1';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const resultsDir = process.env.TETHER_TEST_RESULTS_DIR ?? path.join(repoRoot, '.test-results');

export interface Requirement {
  available: boolean;
  /** Why it is not available (outside CI the suite skips with this reason). */
  reason: string | null;
}

export async function run(command: string, args: string[], options: { timeoutMs?: number; input?: string } = {}): Promise<string> {
  const { stdout } = await execFileAsync(command, args, { timeout: options.timeoutMs ?? 120_000, maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

export async function commandWorks(command: string, args: string[]): Promise<boolean> {
  try {
    await run(command, args, { timeoutMs: 15_000 });
    return true;
  } catch {
    return false;
  }
}

/** Installs Debian packages, one installer at a time across parallel test workers. */
export async function aptInstall(packages: string[]): Promise<void> {
  const script = 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"';
  await run('flock', ['/tmp/tether-apt.lock', 'bash', '-c', script, 'apt-install', ...packages], { timeoutMs: 600_000 });
}

function currentTestFile(): string {
  const stack = new Error().stack ?? '';
  const match = stack.split('\n').find((line) => /\.test\.[cm]?[jt]s/.test(line));
  const file = match?.match(/(\/[^\s():]+\.test\.[cm]?[jt]s)/)?.[1];
  return file ? path.relative(repoRoot, file) : 'unknown test file';
}

/**
 * Records a skipped suite so the root test command can list every skip and its reason at the end.
 * Outside CI only; under CI a missing dependency is an error.
 */
export function recordSkip(dependency: string, reason: string, skipsFile = path.join(resultsDir, 'skips.jsonl')): void {
  mkdirSync(path.dirname(skipsFile), { recursive: true });
  const line = JSON.stringify({ file: currentTestFile(), dependency, reason, at: new Date().toISOString() });
  appendFileSync(skipsFile, `${line}\n`);
}

/**
 * Makes a system dependency available: probe, and when it fails under CI install
 * and probe again (a failure then throws and fails the suite). Outside CI a
 * missing dependency is recorded as a skip.
 */
export async function requireSystem(
  dependency: string,
  steps: { probe: () => Promise<boolean>; install: () => Promise<void>; hint: string; ci?: boolean; skipsFile?: string },
): Promise<Requirement> {
  if (await steps.probe()) return { available: true, reason: null };
  if (!(steps.ci ?? isCI)) {
    const reason = `${dependency} is not available (${steps.hint}); set CI=true to let the test kit install it`;
    recordSkip(dependency, reason, steps.skipsFile);
    return { available: false, reason };
  }
  await steps.install();
  if (await steps.probe()) return { available: true, reason: null };
  throw new Error(`${dependency} could not be made available under CI (${steps.hint})`);
}

/** Names from `names` that docs/operations.md does not list as a table row (`| \`NAME\` |`). */
export function undocumentedEnvVars(names: readonly string[]): string[] {
  const doc = readFileSync(path.join(repoRoot, 'docs', 'operations.md'), 'utf8');
  return names.filter((name) => !doc.includes(`| \`${name}\` |`));
}
