import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';

// The real `tether` binary (packages/cli, built) as a child process, with its
// own config folder, so tests see exit codes and output as a user would.

const bin = createRequire(import.meta.url).resolve('@tether/cli/bin/tether.mjs');

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface CliChild {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  done: Promise<CliRun>;
}

/** Starts `tether ...args` with TETHER_CONFIG_DIR=configDir; `stdin` is written and closed. */
export function startCli(args: string[], options: { configDir: string; stdin?: string; env?: Record<string, string> }): CliChild {
  const started = performance.now();
  const child = spawn(process.execPath, [bin, ...args], {
    env: { PATH: process.env.PATH, HOME: options.configDir, TETHER_CONFIG_DIR: options.configDir, ...options.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdin!.end(options.stdin ?? '');
  const done = new Promise<CliRun>((resolve) => {
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr, ms: performance.now() - started }));
  });
  return { child, stdout: () => stdout, stderr: () => stderr, done };
}

/** Runs `tether ...args` to its end (killed after timeoutMs). */
export async function runCli(args: string[], options: { configDir: string; stdin?: string; env?: Record<string, string>; timeoutMs?: number }): Promise<CliRun> {
  const run = startCli(args, options);
  const timer = setTimeout(() => run.child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
  try {
    return await run.done;
  } finally {
    clearTimeout(timer);
  }
}
